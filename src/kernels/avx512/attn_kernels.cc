// AVX-512 variants of the fused attention kernels (kernels/attn_kernels.h) for the float KV codecs
// (f32, f16, bf16), bit-identical to the AVX2 ones (avx2/attn_kernels.cc); every other codec and
// head size goes to those.
//
// Scores: the AVX2 kernel keeps, per row and head, an 8-lane accumulator fed the row's 8-value
// steps in order. Here one 512-bit register holds two rows' accumulators (lanes 0-7 row r, 8-15
// row r+1) against the head's 8 query values broadcast to both halves; the halves then go through
// the same 8-row horizontal sums. Accumulation: each output element is a chain of fmas over the
// rows in order; here 16 consecutive elements share a register instead of 8. Per element, the
// operations are the AVX2 kernel's.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/avx512/zmm_lanes.h"
#include "kernels/kv_codec.h"

#if !defined(__AVX512F__)
#error "attn_kernels.cc needs -mavx512f (see the top-level CMakeLists.txt)"
#endif

namespace hz::kernels::vnni {
namespace {

using avx2::softmax_rescale;

// Row values as f32: pair(a, b, i) = 8 values of row a and of row b at element i; wide(row, i) =
// 16 consecutive values of one row; narrow(row, i) = 8 (the AVX2 kernel's load).
struct F32Rows {
  static __m512 pair(const uint8_t* a, const uint8_t* b, int64_t i) { return pair_f32(a + 4 * i, b + 4 * i); }
  static __m512 wide(const uint8_t* row, int64_t i) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static __m256 narrow(const uint8_t* row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
};
struct F16Rows {
  static __m512 pair(const uint8_t* a, const uint8_t* b, int64_t i) { return pair_f16(a + 2 * i, b + 2 * i); }
  static __m512 wide(const uint8_t* row, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m256 narrow(const uint8_t* row, int64_t i) { return avx2::load_f16(reinterpret_cast<const uint16_t*>(row + 2 * i)); }
};
struct BF16Rows {
  static __m512 pair(const uint8_t* a, const uint8_t* b, int64_t i) { return pair_bf16(a + 2 * i, b + 2 * i); }
  static __m512 wide(const uint8_t* row, int64_t i) {
    return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m256 narrow(const uint8_t* row, int64_t i) { return avx2::load_bf16(reinterpret_cast<const uint16_t*>(row + 2 * i)); }
};

inline int64_t load_i64(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
// int8 codes as floats (the AVX2 kernel's sign extension and conversion, 16 lanes at once).
inline __m128i load_i64x2(const uint8_t* a, const uint8_t* b) {
  return _mm_set_epi64x(load_i64(b), load_i64(a));
}
struct I8Rows {
  static __m512 pair(const uint8_t* a, const uint8_t* b, int64_t i) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load_i64x2(a + i, b + i)));
  }
  static __m512 wide(const uint8_t* row, int64_t i) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i))));
  }
  static __m256 narrow(const uint8_t* row, int64_t i) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(load_i64(row + i))));
  }
};
// E4M3 bytes widened through f16 bits as the AVX2 kernel does (the value times 2^-8; E4M3 NaN to
// an f16 NaN), 16 at once.
inline __m512 fp8_to_f32(__m128i bytes) {
  const __m256i w = _mm256_cvtepu8_epi16(bytes);
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8);
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7);
  const __m256i nan = _mm256_and_si256(_mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x3f80)), _mm256_set1_epi16(0x7e00));
  return _mm512_cvtph_ps(_mm256_or_si256(_mm256_or_si256(sign, mag), nan));
}
struct Fp8Rows {
  static __m512 pair(const uint8_t* a, const uint8_t* b, int64_t i) { return fp8_to_f32(load_i64x2(a + i, b + i)); }
  static __m512 wide(const uint8_t* row, int64_t i) {
    return fp8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
  }
  static __m256 narrow(const uint8_t* row, int64_t i) { return _mm512_castps512_ps256(fp8_to_f32(_mm_cvtsi64_si128(load_i64(row + i)))); }
};
constexpr float kFp8Unscale = 256.0f;  // the AVX2 kernel's: E4M3 read as f16 is the value times 2^-8

constexpr int64_t kRowBlock = 16;  // the AVX2 kernel's row block (the reduction groups 8 of them)

// scores[h * sstride + r] for G heads, times `post` (1 for the float codecs, fp8's head scale).
template <int G, class L>
void scores_plain(const float* q, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd, float post, float* scores,
                  int64_t sstride) {
  __m256 accs[kRowBlock][G];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    for (int64_t r = 0; r < nr; r += 2) {
      const uint8_t* a = elems + (r0 + r) * reb;
      const uint8_t* b = r + 1 < nr ? a + reb : a;  // an odd last row pairs with itself
      __m512 acc[G];
      HZ_UNROLL
      for (int h = 0; h < G; ++h) acc[h] = _mm512_setzero_ps();
      for (int64_t i = 0; i < hd; i += 8) {
        const __m512 v = L::pair(a, b, i);
        HZ_UNROLL
        for (int h = 0; h < G; ++h) acc[h] = _mm512_fmadd_ps(bcast8(q + h * hd + i), v, acc[h]);
      }
      HZ_UNROLL
      for (int h = 0; h < G; ++h) {
        accs[r][h] = _mm512_castps512_ps256(acc[h]);
        if (r + 1 < nr) accs[r + 1][h] = high_half(acc[h]);
      }
    }
    avx2::store_scores<G>(accs, nr, post, scores + r0, sstride);
  }
}

// Scores over int8 rows, as the AVX2 kernel: per row and group a product chain t, then acc =
// fma(scale, t, acc); two rows per register with their own scales in each half.
template <int G, class L>
void scores_grouped(const float* q, const uint8_t* elems, const uint8_t* scales, int64_t reb, int64_t rows, int64_t hd,
                    float* scores, int64_t sstride) {
  const int64_t g = kv_group(hd), ng = kv_groups(hd);
  __m256 accs[kRowBlock][G];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    for (int64_t r = 0; r < nr; r += 2) {
      const int64_t ra = r0 + r, rb = r + 1 < nr ? ra + 1 : ra;
      const uint8_t* a = elems + ra * reb;
      const uint8_t* b = elems + rb * reb;
      __m512 acc[G], t[G];
      HZ_UNROLL
      for (int h = 0; h < G; ++h) acc[h] = _mm512_setzero_ps();
      for (int64_t gi = 0; gi < ng; ++gi) {
        const int64_t b0 = gi * g, e = std::min(hd, b0 + g);
        __m512 v = L::pair(a, b, b0);
        HZ_UNROLL
        for (int h = 0; h < G; ++h) t[h] = _mm512_mul_ps(bcast8(q + h * hd + b0), v);
        for (int64_t i = b0 + 8; i < e; i += 8) {
          v = L::pair(a, b, i);
          HZ_UNROLL
          for (int h = 0; h < G; ++h) t[h] = _mm512_fmadd_ps(bcast8(q + h * hd + i), v, t[h]);
        }
        const __m512 d = join(_mm256_set1_ps(avx2::load_f16_scalar(scales + 2 * (ra * ng + gi))),
                              _mm256_set1_ps(avx2::load_f16_scalar(scales + 2 * (rb * ng + gi))));
        HZ_UNROLL
        for (int h = 0; h < G; ++h) acc[h] = _mm512_fmadd_ps(d, t[h], acc[h]);
      }
      HZ_UNROLL
      for (int h = 0; h < G; ++h) {
        accs[r][h] = _mm512_castps512_ps256(acc[h]);
        if (r + 1 < nr) accs[r + 1][h] = high_half(acc[h]);
      }
    }
    avx2::store_scores<G>(accs, nr, 1.0f, scores + r0, sstride);
  }
}

// acc[h * hd + i] += sum over rows in order of p[h * rows + r] * row_r[i], for G heads: chunks of
// 16 elements (C of them at once, so that C * G chains hide the fma latency), an 8-element tail.
// coef[group][h][r] (kRowBlock rows; ng groups of g elements; a 16-element chunk never straddles
// two: g is 32 or the whole head).
template <int G, int C, class L>
int64_t accumulate_chunks(const float* coef, int64_t ng, int64_t g, const uint8_t* elems, int64_t reb, int64_t rows,
                          int64_t hd, float* acc, int64_t i) {
  for (; i + 16 * C <= hd; i += 16 * C) {
    __m512 a[C][G];
    int64_t gi[C];
    HZ_UNROLL
    for (int c = 0; c < C; ++c) {
      gi[c] = ng == 1 ? 0 : (i + 16 * c) / g;
      HZ_UNROLL
      for (int h = 0; h < G; ++h) a[c][h] = _mm512_loadu_ps(acc + h * hd + i + 16 * c);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = elems + r * reb;
      HZ_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512 v = L::wide(row, i + 16 * c);
        const float* cf = coef + gi[c] * G * kRowBlock + r;
        HZ_UNROLL
        for (int h = 0; h < G; ++h) a[c][h] = _mm512_fmadd_ps(_mm512_set1_ps(cf[h * kRowBlock]), v, a[c][h]);
      }
    }
    HZ_UNROLL
    for (int c = 0; c < C; ++c) {
      HZ_UNROLL
      for (int h = 0; h < G; ++h) _mm512_storeu_ps(acc + h * hd + i + 16 * c, a[c][h]);
    }
  }
  return i;
}

// How the AVX2 kernel scales a row's values in the accumulation: grouped (int8: each group's
// scale per row) or one factor (`post`: 1 for the float codecs, fp8's head scale).
struct RowScales {
  const uint8_t* scales = nullptr;  // f16 per row and group; null: post
  float post = 1.0f;
};
constexpr int64_t kMaxGroups = 16;  // as the AVX2 kernel (handled() keeps to it)

template <int G, class L>
void accumulate_heads(const float* p, int64_t pstride, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd,
                      RowScales rs, float* acc) {
  constexpr int C = G >= 8 ? 1 : (G >= 4 ? 2 : 4);  // 8 or more chains (fma latency 4, two ports)
  const int64_t ng = rs.scales != nullptr ? kv_groups(hd) : 1;
  const int64_t g = rs.scales != nullptr ? kv_group(hd) : hd;
  alignas(64) float coef[kRowBlock * kMaxGroups * G];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    // The AVX2 kernel's coefficients: p times the row's group scale, or times post (one rounding
    // per lane, as its scalar product), 16 rows per vector.
    const __mmask16 live = static_cast<__mmask16>((1u << nr) - 1);
    for (int64_t gi = 0; gi < ng; ++gi) {
      __m512 d = _mm512_set1_ps(rs.post);
      if (rs.scales != nullptr) {
        alignas(64) float ds[kRowBlock] = {};
        for (int64_t r = 0; r < nr; ++r) ds[r] = avx2::load_f16_scalar(rs.scales + 2 * ((r0 + r) * ng + gi));
        d = _mm512_load_ps(ds);
      }
      HZ_UNROLL
      for (int h = 0; h < G; ++h) {
        const __m512 ph = _mm512_maskz_loadu_ps(live, p + h * pstride + r0);
        _mm512_store_ps(coef + (gi * G + h) * kRowBlock, _mm512_mul_ps(ph, d));
      }
    }
    const uint8_t* block = elems + r0 * reb;
    int64_t i = accumulate_chunks<G, C, L>(coef, ng, g, block, reb, nr, hd, acc, 0);
    if (C > 1) i = accumulate_chunks<G, 1, L>(coef, ng, g, block, reb, nr, hd, acc, i);
    if (i < hd) {  // hd % 16 == 8: the last 8 elements, 256-bit
      __m256 a[G];
      const int64_t gt = ng == 1 ? 0 : i / g;
      for (int h = 0; h < G; ++h) a[h] = _mm256_loadu_ps(acc + h * hd + i);
      for (int64_t r = 0; r < nr; ++r) {
        const __m256 v = L::narrow(block + r * reb, i);
        for (int h = 0; h < G; ++h) a[h] = _mm256_fmadd_ps(_mm256_broadcast_ss(coef + (gt * G + h) * kRowBlock + r), v, a[h]);
      }
      for (int h = 0; h < G; ++h) _mm256_storeu_ps(acc + h * hd + i, a[h]);
    }
  }
}

// The scores of every head, in chunks of 8, 4, 2, 1 (a head's arithmetic is the same in any chunk,
// and 8 heads convert each row once): plain rows times `post`, or int8 rows with their group scales.
template <class L, bool kGrouped>
void scores_heads(const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales, int64_t reb,
                  int64_t rows, int64_t hd, float post, float* scores) {
  auto chunk = [&]<int G>(int32_t h) {
    const float* qh = q + h * hd;
    float* sh = scores + h * rows;
    if constexpr (kGrouped) {
      scores_grouped<G, L>(qh, elems, scales, reb, rows, hd, sh, rows);
    } else {
      scores_plain<G, L>(qh, elems, reb, rows, hd, post, sh, rows);
    }
  };
  for (int32_t h = 0; h < num_heads;) {
    const int32_t left = num_heads - h;
    if (left >= 8) {
      chunk.template operator()<8>(h);
      h += 8;
    } else if (left >= 4) {
      chunk.template operator()<4>(h);
      h += 4;
    } else if (left >= 2) {
      chunk.template operator()<2>(h);
      h += 2;
    } else {
      chunk.template operator()<1>(h);
      h += 1;
    }
  }
}

template <class L>
void accumulate_all(const float* p, int32_t num_heads, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd,
                    RowScales rs, float* acc) {
  for (int32_t h = 0; h < num_heads;) {
    const int32_t left = num_heads - h;
    const float* ph = p + h * rows;
    float* ah = acc + h * hd;
    if (left >= 8) {
      accumulate_heads<8, L>(ph, rows, elems, reb, rows, hd, rs, ah);
      h += 8;
    } else if (left >= 4) {
      accumulate_heads<4, L>(ph, rows, elems, reb, rows, hd, rs, ah);
      h += 4;
    } else if (left >= 2) {
      accumulate_heads<2, L>(ph, rows, elems, reb, rows, hd, rs, ah);
      h += 2;
    } else {
      accumulate_heads<1, L>(ph, rows, elems, reb, rows, hd, rs, ah);
      h += 1;
    }
  }
}

// The codecs and head sizes handled here; the AVX2 kernel takes the same head sizes (whole 8-lane
// steps, at most 16 groups) onto its vector path.
bool handled(KvCodec c, int64_t hd) {
  const bool codec = c == KvCodec::kF32 || c == KvCodec::kF16 || c == KvCodec::kBF16 || c == KvCodec::kInt8 ||
                     c == KvCodec::kFp8;
  return codec && hd % 8 == 0 && kv_groups(hd) <= kMaxGroups;
}

// fp8's factor: the head's f32 scale (the first 4 scale bytes) times 2^8, as the AVX2 kernel.
float fp8_post(const uint8_t* scales) {
  float post;
  std::memcpy(&post, scales, 4);
  return post * kFp8Unscale;
}

// avx2::exp_ps on 16 lanes: the same operations lane by lane, so the same values.
inline __m512 exp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.72283f), lo = _mm512_set1_ps(-87.33654f);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i n = _mm512_cvtps_epi32(fx);
  const __m512i n1 = _mm512_srai_epi32(n, 1), n2 = _mm512_sub_epi32(n, n1);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, _mm512_set1_epi32(127)), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, _mm512_set1_epi32(127)), 23));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), _mm512_setzero_ps());
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

}  // namespace

void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t hd, float* scores) {
  if (!handled(c, hd)) return avx2::kv_scores(c, q, num_heads, elems, scales, rows, hd, scores);
  const int64_t reb = kv_row_elem_bytes(c, hd);
  switch (c) {
    case KvCodec::kF32: return scores_heads<F32Rows, false>(q, num_heads, elems, scales, reb, rows, hd, 1.0f, scores);
    case KvCodec::kF16: return scores_heads<F16Rows, false>(q, num_heads, elems, scales, reb, rows, hd, 1.0f, scores);
    case KvCodec::kBF16: return scores_heads<BF16Rows, false>(q, num_heads, elems, scales, reb, rows, hd, 1.0f, scores);
    case KvCodec::kFp8:
      return scores_heads<Fp8Rows, false>(q, num_heads, elems, scales, reb, rows, hd, fp8_post(scales), scores);
    default: return scores_heads<I8Rows, true>(q, num_heads, elems, scales, reb, rows, hd, 1.0f, scores);  // int8
  }
}

void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t hd, float* acc) {
  if (!handled(c, hd)) return avx2::kv_accumulate(c, p, num_heads, elems, scales, rows, hd, acc);
  const int64_t reb = kv_row_elem_bytes(c, hd);
  switch (c) {
    case KvCodec::kF32: return accumulate_all<F32Rows>(p, num_heads, elems, reb, rows, hd, {}, acc);
    case KvCodec::kF16: return accumulate_all<F16Rows>(p, num_heads, elems, reb, rows, hd, {}, acc);
    case KvCodec::kBF16: return accumulate_all<BF16Rows>(p, num_heads, elems, reb, rows, hd, {}, acc);
    case KvCodec::kFp8: return accumulate_all<Fp8Rows>(p, num_heads, elems, reb, rows, hd, {nullptr, fp8_post(scales)}, acc);
    default: return accumulate_all<I8Rows>(p, num_heads, elems, reb, rows, hd, {scales, 1.0f}, acc);  // int8
  }
}

// A tile of at most 16 scores per head in one register: the maximum, then the exponentials, their
// two 8-lane halves added as the AVX2 kernel's two steps (lanes past n are exp(-inf) = 0) and
// summed by its horizontal sum. Longer tiles go to the AVX2 kernel.
void softmax_tile(float* s, int32_t heads, int64_t n, int64_t hd, bool first, float* part) {
  if (n > 16) return avx2::softmax_tile(s, heads, n, hd, first, part);
  const __mmask16 live = static_cast<__mmask16>((1u << n) - 1);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  for (int32_t h = 0; h < heads; ++h) {
    float* x = s + h * n;
    const __m512 v = _mm512_mask_loadu_ps(ninf, live, x);
    const float m = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0 ? __builtin_nanf("") : _mm512_reduce_max_ps(v);
    const __m512 e = exp16(_mm512_sub_ps(v, _mm512_set1_ps(softmax_rescale(m, h, heads, hd, first, part))));
    _mm512_mask_storeu_ps(x, live, e);
    const __m256 lo = _mm512_castps512_ps256(e);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1));
    part[heads + h] += avx2::hsum(_mm256_add_ps(lo, hi));
  }
}

}  // namespace hz::kernels::vnni
