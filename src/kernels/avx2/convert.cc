// AVX2/F16C row conversions and activation quantizers (Q8_0, Q8_K). Bit-identical to the scalar
// references for every non-NaN input (NaN payloads may differ in f32->f16).
#include <cmath>

#include "base/check.h"
#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels::avx2 {

void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_f16(x + i));
  if (i < n) _mm256_maskstore_ps(y + i, tail_mask(n - i), load_f16_partial(x + i, n - i));
}

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_bf16(x + i));
  if (i < n) _mm256_maskstore_ps(y + i, tail_mask(n - i), load_bf16_partial(x + i, n - i));
}

void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i v = _mm256_blendv_epi8(rounded, quiet, is_nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// roundf semantics (half away from zero), exact: x - trunc(x) is exact in f32.
inline __m256i round_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = abs_ps(_mm256_sub_ps(v, t));
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one);
  return _mm256_cvttps_epi32(_mm256_add_ps(t, up));
}

// Four vectors of 8 int32 (each in int8 range) to 32 int8 in element order.
inline __m256i pack_i32x4_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  HZ_CHECK(n % kQK8_0 == 0);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(xb + 8 * k);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])), _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3])));
    const float amax = hmax(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = round_away(_mm256_mul_ps(v[k], idv));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), pack_i32x4_to_i8(q[0], q[1], q[2], q[3]));
  }
}

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  HZ_CHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K; k += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(xb + k)));
    const float amax = hmax(m);
    if (!(amax > 0.0f)) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    int first = 0;  // the first element of largest magnitude decides the sign, as in the reference
    while (std::fabs(xb[first]) != amax) ++first;
    const float iscale = -127.0f / xb[first];
    const __m256 is = _mm256_set1_ps(iscale);
    for (int k = 0; k < kQK_K; k += 32) {
      __m256i q[4];
      for (int j = 0; j < 4; ++j) {
        const __m256 v = _mm256_mul_ps(is, _mm256_loadu_ps(xb + k + 8 * j));
        q[j] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                                _mm256_set1_epi32(127));
      }
      const __m256i q8 = pack_i32x4_to_i8(q[0], q[1], q[2], q[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + k), q8);
      // Group sums of 16: widen to int16 and add pairs horizontally.
      const __m256i w16 = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q8)), _mm256_set1_epi16(1));
      const __m256i w16b = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q8, 1)), _mm256_set1_epi16(1));
      int32_t part[16];
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(part), w16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(part + 8), w16b);
      for (int g = 0; g < 2; ++g) {
        int32_t s = 0;
        for (int j = 0; j < 8; ++j) s += part[g * 8 + j];
        y[b].bsums[k / 16 + g] = static_cast<int16_t>(s);
      }
    }
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace hz::kernels::avx2
