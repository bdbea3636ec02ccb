// Inline AVX2 helpers shared by the avx2/ and avx512/ translation units (include only from files
// compiled with at least -mavx2 -mfma -mf16c): fixed-order horizontal sums, tail masks, a
// vectorized expf.
//
// NOTE: internal linkage only (anonymous namespace), like int_lanes.h: the avx512/ files include
// this too, and an inline function with external linkage would get one copy for the whole program,
// which the linker may take from an AVX-512 translation unit (an unoptimized build emits them) and
// run on a CPU without AVX-512.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/unaligned.h"

namespace hz::kernels::avx2 {
namespace {

// Horizontal sum in one fixed order: (lo128 + hi128), then pairs, then the last two lanes.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane mask with the first `count` (0..8) lanes set, for maskload/maskstore of a row's tail.
inline __m256i tail_mask(int64_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), idx);
}

// 8 f16 values to f32; the partial form reads only `count` values and zero-fills the rest.
inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_f16_partial(const uint16_t* p, int64_t count) {
  uint16_t buf[8] = {};
  std::memcpy(buf, p, count * sizeof(uint16_t));
  return load_f16(buf);
}
inline __m256 load_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline __m256 load_bf16_partial(const uint16_t* p, int64_t count) {
  uint16_t buf[8] = {};
  std::memcpy(buf, p, count * sizeof(uint16_t));
  return load_bf16(buf);
}
inline __m256 load_f32_partial(const float* p, int64_t count) {
  return _mm256_maskload_ps(p, tail_mask(count));
}

inline float f16_scalar(uint16_t h) { return _cvtsh_ss(h); }

// Field reads through byte pointers: rows may sit at any byte address (no alignment assumed).
inline float load_f16_scalar(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

// expf to about 2 ulp (Cephes-style: 2^round(x log2 e) times a degree-6 polynomial of the rest).
// exp(x) = 0 below -87.33 (no subnormal results), +inf above 88.72, NaN stays NaN.
inline __m256 exp_ps(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.72283f), lo = _mm256_set1_ps(-87.33654f);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // fx is in [-126, 128]: 2^fx as bits; 2^128 overflows the exponent, so scale in two halves.
  const __m256i n = _mm256_cvtps_epi32(fx);
  const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// softmax_tile's running state of head h before a tile whose largest score is m: reset on the first
// tile, rescaled by exp(max - m) when m is larger. Returns the maximum the scores are shifted by.
inline float softmax_rescale(float m, int32_t h, int32_t heads, int64_t hd, bool first, float* part) {
  float& mx = part[h];
  float& sum = part[heads + h];
  float* ah = part + 2 * heads + h * hd;
  if (first) {
    mx = m;
    sum = 0;
    std::memset(ah, 0, sizeof(float) * hd);
  } else if (mx < m) {
    const float c = std::exp(mx - m);
    sum *= c;
    for (int64_t i = 0; i < hd; ++i) ah[i] *= c;
    mx = m;
  }
  return mx;
}

// Eight horizontal sums at once: lane j of the result is the sum of v[j]'s lanes, in the order
// ((0+1)+(2+3)) + ((4+5)+(6+7)) whatever the other vectors hold.
inline __m256 hsum8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Attention scores from per-row accumulators: scores[h * sstride + r] = hsum(acc[r][h]) * post for
// rows [0, rows), eight rows per reduction (a row's value does not depend on its neighbours).
template <int G>
void store_scores(__m256 (*acc)[G], int64_t rows, float post, float* scores, int64_t sstride) {
  const __m256 vp = _mm256_set1_ps(post);
  for (int h = 0; h < G; ++h) {
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
      __m256 v[8];
      const int64_t nr = std::min<int64_t>(8, rows - r0);
      for (int64_t j = 0; j < 8; ++j) v[j] = j < nr ? acc[r0 + j][h] : _mm256_setzero_ps();
      const __m256 s = _mm256_mul_ps(hsum8(v), vp);
      if (nr == 8) {
        _mm256_storeu_ps(scores + h * sstride + r0, s);
      } else {
        _mm256_maskstore_ps(scores + h * sstride + r0, tail_mask(nr), s);
      }
    }
  }
}

}  // namespace
}  // namespace hz::kernels::avx2
