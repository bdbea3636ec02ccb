// AVX2 fused attention kernels (kernels/attn_kernels.h). Rows are dequantized 8 values at a time in
// registers and used by every query head of the group before the next 8 are loaded, so a KV row is
// read and converted once per group. Group scales are applied once per group (scores) or folded
// into the per-row coefficient (accumulation). fp8 is widened through f16 bits (E4M3 sits inside
// f16 scaled by 2^-8; the 2^8 goes into the scale), which avoids a table gather.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/kv_codes.h"
#include "tensor/dtype.h"

namespace hz::kernels::avx2 {
namespace {

// F16C inline: an out-of-line call here would spill every accumulator register.
inline float scale_of(const uint8_t* scales, int64_t idx) { return load_f16_scalar(scales + 2 * idx); }

struct LoadF32 {
  __m256 operator()(const uint8_t* row, int64_t i) const { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
};
struct LoadF16 {
  __m256 operator()(const uint8_t* row, int64_t i) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
};
struct LoadBF16 {
  __m256 operator()(const uint8_t* row, int64_t i) const { return load_bf16(reinterpret_cast<const uint16_t*>(row + 2 * i)); }
};
// E4M3 byte s.eeee.mmm -> f16 bits s.0eeee.mmm0000000: the f16 value is the E4M3 value times 2^-8
// for normals and subnormals alike. 0x7f / 0xff (E4M3 NaN) map to an f16 NaN.
struct LoadFp8 {
  __m256 operator()(const uint8_t* row, int64_t i) const {
    int64_t v;
    std::memcpy(&v, row + i, 8);
    const __m128i w = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(v));
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8);
    const __m128i mag = _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x7f)), 7);
    const __m128i nan = _mm_and_si128(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x3f80)), _mm_set1_epi16(0x7e00));
    return _mm256_cvtph_ps(_mm_or_si128(_mm_or_si128(sign, mag), nan));
  }
};
constexpr float kFp8Unscale = 256.0f;
struct LoadI8 {
  __m256 operator()(const uint8_t* row, int64_t i) const { return _mm256_cvtepi32_ps(kv_codes_i8(row, i)); }
};
// 8 int4 codes minus 8.
struct LoadI4 {
  __m256 operator()(const uint8_t* row, int64_t i) const {
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(kv_codes_u4(row, i), _mm256_set1_epi32(8)));
  }
};
// 8 codes of a channel-scaled codec (int8c, int4c, int3, int2: kv_codes.h) as values: (q + off) *
// d with their channels' offsets and scales (decoded once per call), so the plain paths need no
// scales. The same operations as the reference, element by element.
template <__m256i (*Codes)(const uint8_t*, int64_t)>
struct LoadChannelScaled {
  const float* d;
  const float* off;
  __m256 operator()(const uint8_t* row, int64_t i) const {
    const __m256 q = _mm256_cvtepi32_ps(Codes(row, i));
    return _mm256_mul_ps(_mm256_add_ps(q, _mm256_loadu_ps(off + i)), _mm256_loadu_ps(d + i));
  }
};
using LoadI8c = LoadChannelScaled<kv_codes_u8>;
using LoadI4c = LoadChannelScaled<kv_codes_u4>;
using LoadI3 = LoadChannelScaled<kv_codes_u3>;
using LoadI2 = LoadChannelScaled<kv_codes_u2>;

// The channel scales and offsets of a channel-scaled head as floats (head_dim <= 512, vector_ok).
struct ChannelScales {
  float d[512], off[512];
  ChannelScales(KvCodec c, const uint8_t* scales, int64_t hd) {
    for (int64_t i = 0; i < hd; ++i) {
      d[i] = kv_byte_scale(scales[i]);
      off[i] = kv_channel_offset(c, scales, hd, i);
    }
  }
};

constexpr int64_t kRowBlock = 16;

// Scores of G heads over rows whose group scales are 1 (f32/f16/bf16/fp8): one dot per head,
// then times `post`.
template <int G, class Load>
void scores_plain(const float* q, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd, float post,
                  float* scores, int64_t sstride, Load load) {
  __m256 accs[kRowBlock][G];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    for (int64_t r = 0; r < nr; ++r) {
      const uint8_t* row = elems + (r0 + r) * reb;
      __m256 acc[G];
      for (int h = 0; h < G; ++h) acc[h] = _mm256_setzero_ps();
      for (int64_t i = 0; i < hd; i += 8) {
        const __m256 v = load(row, i);
        for (int h = 0; h < G; ++h) acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * hd + i), v, acc[h]);
      }
      for (int h = 0; h < G; ++h) accs[r][h] = acc[h];
    }
    store_scores<G>(accs, nr, post, scores + r0, sstride);
  }
}

// Scores over int8/int4 rows: each group's partial dot is multiplied by its scale once.
template <int G, class Load>
void scores_grouped(const float* q, const uint8_t* elems, const uint8_t* scales, int64_t reb, int64_t rows, int64_t hd,
                    float* scores, int64_t sstride, Load load) {
  const int64_t g = kv_group(hd), ng = kv_groups(hd);
  __m256 accs[kRowBlock][G];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    for (int64_t rr = 0; rr < nr; ++rr) {
      const int64_t r = r0 + rr;
      const uint8_t* row = elems + r * reb;
      __m256 acc[G], t[G];
      for (int h = 0; h < G; ++h) acc[h] = _mm256_setzero_ps();
      for (int64_t gi = 0; gi < ng; ++gi) {
        const int64_t b = gi * g, e = std::min(hd, b + g);
        __m256 v = load(row, b);
        for (int h = 0; h < G; ++h) t[h] = _mm256_mul_ps(_mm256_loadu_ps(q + h * hd + b), v);
        for (int64_t i = b + 8; i < e; i += 8) {
          v = load(row, i);
          for (int h = 0; h < G; ++h) t[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * hd + i), v, t[h]);
        }
        const __m256 d = _mm256_set1_ps(scale_of(scales, r * ng + gi));
        for (int h = 0; h < G; ++h) acc[h] = _mm256_fmadd_ps(d, t[h], acc[h]);
      }
      for (int h = 0; h < G; ++h) accs[rr][h] = acc[h];
    }
    store_scores<G>(accs, nr, 1.0f, scores + r0, sstride);
  }
}

// acc[h][i] += sum_r coef[r][group of i][h] * raw_r[i], rows in order, for rows <= kRowBlock.
// C chunks of 8 values go through the row loop together: each (chunk, head) accumulator is a serial
// chain over the rows, so C * G of them keep the FMA units busy (one chain would wait on latency).
// Each element's arithmetic is the same for any C.
constexpr int64_t kMaxGroups = 16;  // head dims up to 512 (larger fall back to the reference)
template <int G, int C, class Load>
int64_t accumulate_chunks(const float* coef, int64_t ng_coef, const uint8_t* elems, int64_t reb, int64_t rows,
                          int64_t hd, int64_t g, float* acc, int64_t i, Load load) {
  for (; i + 8 * C <= hd; i += 8 * C) {
    __m256 a[C][G];
    int64_t gi[C];
    for (int c = 0; c < C; ++c) {
      gi[c] = ng_coef == 1 ? 0 : (i + 8 * c) / g;
      for (int h = 0; h < G; ++h) a[c][h] = _mm256_loadu_ps(acc + h * hd + i + 8 * c);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = elems + r * reb;
      const float* cr = coef + r * ng_coef * G;
      for (int c = 0; c < C; ++c) {
        const __m256 v = load(row, i + 8 * c);
        const float* cf = cr + gi[c] * G;
        for (int h = 0; h < G; ++h) a[c][h] = _mm256_fmadd_ps(_mm256_broadcast_ss(cf + h), v, a[c][h]);
      }
    }
    for (int c = 0; c < C; ++c) {
      for (int h = 0; h < G; ++h) _mm256_storeu_ps(acc + h * hd + i + 8 * c, a[c][h]);
    }
  }
  return i;
}

template <int G, class Load>
void accumulate_block(const float* coef, int64_t ng_coef, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd,
                      int64_t g, float* acc, Load load) {
  constexpr int C = G >= 8 ? 1 : (G >= 4 ? 2 : 4);
  const int64_t i = accumulate_chunks<G, C>(coef, ng_coef, elems, reb, rows, hd, g, acc, 0, load);
  if (C > 1 && i < hd) accumulate_chunks<G, 1>(coef, ng_coef, elems, reb, rows, hd, g, acc, i, load);
}

template <int G, class Load>
void accumulate_heads(KvCodec c, const float* p, int64_t pstride, const uint8_t* elems, const uint8_t* scales,
                      int64_t rows, int64_t hd, float* acc, Load load) {
  const int64_t reb = kv_row_elem_bytes(c, hd);
  const bool grouped = kv_grouped(c);
  const int64_t ng = grouped ? kv_groups(hd) : 1;
  const int64_t g = grouped ? kv_group(hd) : hd;
  float post = 1.0f;
  if (c == KvCodec::kFp8) {
    std::memcpy(&post, scales, 4);
    post *= kFp8Unscale;
  }
  alignas(32) float coef[kRowBlock * kMaxGroups * G];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    for (int64_t r = 0; r < nr; ++r) {
      for (int64_t gi = 0; gi < ng; ++gi) {
        const float d = grouped ? scale_of(scales, (r0 + r) * ng + gi) : post;
        for (int h = 0; h < G; ++h) coef[(r * ng + gi) * G + h] = p[h * pstride + r0 + r] * d;
      }
    }
    accumulate_block<G>(coef, ng, elems + r0 * reb, reb, nr, hd, g, acc, load);
  }
}

template <class Load>
void scores_dispatch(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                     int64_t rows, int64_t hd, float* scores, Load load) {
  const int64_t reb = kv_row_elem_bytes(c, hd);
  const bool grouped = kv_grouped(c);
  float post = 1.0f;
  if (c == KvCodec::kFp8) {
    std::memcpy(&post, scales, 4);
    post *= kFp8Unscale;
  }
  // Heads in chunks of 4, 2, 1: each head's arithmetic is the same in any chunk.
  for (int32_t h = 0; h < num_heads;) {
    const int32_t left = num_heads - h;
    const float* qh = q + h * hd;
    float* sh = scores + h * rows;
    if (left >= 4) {
      grouped ? scores_grouped<4>(qh, elems, scales, reb, rows, hd, sh, rows, load)
              : scores_plain<4>(qh, elems, reb, rows, hd, post, sh, rows, load);
      h += 4;
    } else if (left >= 2) {
      grouped ? scores_grouped<2>(qh, elems, scales, reb, rows, hd, sh, rows, load)
              : scores_plain<2>(qh, elems, reb, rows, hd, post, sh, rows, load);
      h += 2;
    } else {
      grouped ? scores_grouped<1>(qh, elems, scales, reb, rows, hd, sh, rows, load)
              : scores_plain<1>(qh, elems, reb, rows, hd, post, sh, rows, load);
      h += 1;
    }
  }
}

template <class Load>
void accumulate_dispatch(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                         int64_t rows, int64_t hd, float* acc, Load load) {
  for (int32_t h = 0; h < num_heads;) {
    const int32_t left = num_heads - h;
    const float* ph = p + h * rows;
    float* ah = acc + h * hd;
    if (left >= 8) {
      accumulate_heads<8>(c, ph, rows, elems, scales, rows, hd, ah, load);
      h += 8;
    } else if (left >= 4) {
      accumulate_heads<4>(c, ph, rows, elems, scales, rows, hd, ah, load);
      h += 4;
    } else if (left >= 2) {
      accumulate_heads<2>(c, ph, rows, elems, scales, rows, hd, ah, load);
      h += 2;
    } else {
      accumulate_heads<1>(c, ph, rows, elems, scales, rows, hd, ah, load);
      h += 1;
    }
  }
}

// Head dims the vector paths take: whole 8-lane chunks (so int8/int4 groups are too) and few enough
// groups for the coefficient buffer.
bool vector_ok(int64_t hd) { return hd % 8 == 0 && kv_groups(hd) <= kMaxGroups; }

// Calls f with the row loader of codec c (channel-scaled codecs decode their scales first).
template <class F>
void with_loader(KvCodec c, const uint8_t* scales, int64_t hd, F&& f) {
  switch (c) {
    case KvCodec::kF32: return f(LoadF32{});
    case KvCodec::kF16: return f(LoadF16{});
    case KvCodec::kBF16: return f(LoadBF16{});
    case KvCodec::kFp8: return f(LoadFp8{});
    case KvCodec::kInt8: return f(LoadI8{});
    case KvCodec::kInt4: return f(LoadI4{});
    case KvCodec::kInt8c: {
      const ChannelScales d(c, scales, hd);
      return f(LoadI8c{d.d, d.off});
    }
    case KvCodec::kInt4c: {
      const ChannelScales d(c, scales, hd);
      return f(LoadI4c{d.d, d.off});
    }
    case KvCodec::kInt3: {
      const ChannelScales d(c, scales, hd);
      return f(LoadI3{d.d, d.off});
    }
    case KvCodec::kInt2: {
      const ChannelScales d(c, scales, hd);
      return f(LoadI2{d.d, d.off});
    }
  }
}

}  // namespace

void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t hd, float* scores) {
  if (!vector_ok(hd)) return ref::kv_scores(c, q, num_heads, elems, scales, rows, hd, scores);
  with_loader(c, scales, hd,
              [&](auto load) { scores_dispatch(c, q, num_heads, elems, scales, rows, hd, scores, load); });
}

void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t hd, float* acc) {
  if (!vector_ok(hd)) return ref::kv_accumulate(c, p, num_heads, elems, scales, rows, hd, acc);
  with_loader(c, scales, hd,
              [&](auto load) { accumulate_dispatch(c, p, num_heads, elems, scales, rows, hd, acc, load); });
}

float exp_shift_sum(float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 sum = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    // Lanes past n are -inf: exp gives 0 and the sum is unchanged.
    const __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), _mm256_maskload_ps(x + i, m),
                                      _mm256_castsi256_ps(m));
    const __m256 e = exp_ps(_mm256_sub_ps(v, s));
    _mm256_maskstore_ps(x + i, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  return hsum(sum);
}

// The reference's arithmetic with the maximum taken 8 lanes at a time (the same value: max is
// exact) and exp_shift_sum's AVX2 exponentials.
void softmax_tile(float* s, int32_t heads, int64_t n, int64_t hd, bool first, float* part) {
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  for (int32_t h = 0; h < heads; ++h) {
    float* x = s + h * n;
    __m256 vm = ninf, bad = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 v = _mm256_loadu_ps(x + j);
      vm = _mm256_max_ps(vm, v);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (j < n) {
      const __m256i live = tail_mask(n - j);
      const __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + j, live), _mm256_castsi256_ps(live));
      vm = _mm256_max_ps(vm, v);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    const float m = _mm256_movemask_ps(bad) != 0 ? __builtin_nanf("") : hmax(vm);
    part[heads + h] += exp_shift_sum(x, n, softmax_rescale(m, h, heads, hd, first, part));
  }
}

}  // namespace hz::kernels::avx2
