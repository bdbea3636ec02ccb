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

constexpr int64_t kRowBlock = 16;  // the AVX2 kernel's row block (the reduction groups 8 of them)

// scores[h * sstride + r] for G heads (the plain codecs' post-scale is 1).
template <int G, class L>
void scores_plain(const float* q, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd, float* scores,
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
    avx2::store_scores<G>(accs, nr, 1.0f, scores + r0, sstride);
  }
}

// acc[h * hd + i] += sum over rows in order of p[h * rows + r] * row_r[i], for G heads: chunks of
// 16 elements (C of them at once, so that C * G chains hide the fma latency), an 8-element tail.
template <int G, int C, class L>
int64_t accumulate_chunks(const float* coef, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd, float* acc,
                          int64_t i) {
  for (; i + 16 * C <= hd; i += 16 * C) {
    __m512 a[C][G];
    HZ_UNROLL
    for (int c = 0; c < C; ++c) {
      HZ_UNROLL
      for (int h = 0; h < G; ++h) a[c][h] = _mm512_loadu_ps(acc + h * hd + i + 16 * c);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = elems + r * reb;
      const float* cr = coef + r * G;
      HZ_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512 v = L::wide(row, i + 16 * c);
        HZ_UNROLL
        for (int h = 0; h < G; ++h) a[c][h] = _mm512_fmadd_ps(_mm512_set1_ps(cr[h]), v, a[c][h]);
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

template <int G, class L>
void accumulate_heads(const float* p, int64_t pstride, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd,
                      float* acc) {
  constexpr int C = G >= 4 ? 1 : (G >= 2 ? 2 : 4);
  alignas(64) float coef[kRowBlock * G];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    // The AVX2 kernel's coefficients: p * 1 for the plain codecs.
    for (int64_t r = 0; r < nr; ++r) {
      for (int h = 0; h < G; ++h) coef[r * G + h] = p[h * pstride + r0 + r] * 1.0f;
    }
    const uint8_t* block = elems + r0 * reb;
    int64_t i = accumulate_chunks<G, C, L>(coef, block, reb, nr, hd, acc, 0);
    if (C > 1) i = accumulate_chunks<G, 1, L>(coef, block, reb, nr, hd, acc, i);
    if (i < hd) {  // hd % 16 == 8: the last 8 elements, 256-bit
      __m256 a[G];
      for (int h = 0; h < G; ++h) a[h] = _mm256_loadu_ps(acc + h * hd + i);
      for (int64_t r = 0; r < nr; ++r) {
        const __m256 v = L::narrow(block + r * reb, i);
        for (int h = 0; h < G; ++h) a[h] = _mm256_fmadd_ps(_mm256_broadcast_ss(coef + r * G + h), v, a[h]);
      }
      for (int h = 0; h < G; ++h) _mm256_storeu_ps(acc + h * hd + i, a[h]);
    }
  }
}

template <class L>
void scores_heads(const float* q, int32_t num_heads, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd,
                  float* scores) {
  for (int32_t h = 0; h < num_heads;) {
    const int32_t left = num_heads - h;
    const float* qh = q + h * hd;
    float* sh = scores + h * rows;
    if (left >= 4) {
      scores_plain<4, L>(qh, elems, reb, rows, hd, sh, rows);
      h += 4;
    } else if (left >= 2) {
      scores_plain<2, L>(qh, elems, reb, rows, hd, sh, rows);
      h += 2;
    } else {
      scores_plain<1, L>(qh, elems, reb, rows, hd, sh, rows);
      h += 1;
    }
  }
}

template <class L>
void accumulate_all(const float* p, int32_t num_heads, const uint8_t* elems, int64_t reb, int64_t rows, int64_t hd,
                    float* acc) {
  for (int32_t h = 0; h < num_heads;) {
    const int32_t left = num_heads - h;
    const float* ph = p + h * rows;
    float* ah = acc + h * hd;
    if (left >= 8) {
      accumulate_heads<8, L>(ph, rows, elems, reb, rows, hd, ah);
      h += 8;
    } else if (left >= 4) {
      accumulate_heads<4, L>(ph, rows, elems, reb, rows, hd, ah);
      h += 4;
    } else if (left >= 2) {
      accumulate_heads<2, L>(ph, rows, elems, reb, rows, hd, ah);
      h += 2;
    } else {
      accumulate_heads<1, L>(ph, rows, elems, reb, rows, hd, ah);
      h += 1;
    }
  }
}

// The codecs and head sizes handled here; the AVX2 kernel takes the same head sizes (whole 8-lane
// steps, at most 16 groups) onto its vector path.
bool handled(KvCodec c, int64_t hd) {
  return (c == KvCodec::kF32 || c == KvCodec::kF16 || c == KvCodec::kBF16) && hd % 8 == 0 && kv_groups(hd) <= 16;
}

}  // namespace

void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t hd, float* scores) {
  if (!handled(c, hd)) return avx2::kv_scores(c, q, num_heads, elems, scales, rows, hd, scores);
  const int64_t reb = kv_row_elem_bytes(c, hd);
  if (c == KvCodec::kF32) return scores_heads<F32Rows>(q, num_heads, elems, reb, rows, hd, scores);
  if (c == KvCodec::kF16) return scores_heads<F16Rows>(q, num_heads, elems, reb, rows, hd, scores);
  return scores_heads<BF16Rows>(q, num_heads, elems, reb, rows, hd, scores);
}

void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t hd, float* acc) {
  if (!handled(c, hd)) return avx2::kv_accumulate(c, p, num_heads, elems, scales, rows, hd, acc);
  const int64_t reb = kv_row_elem_bytes(c, hd);
  if (c == KvCodec::kF32) return accumulate_all<F32Rows>(p, num_heads, elems, reb, rows, hd, acc);
  if (c == KvCodec::kF16) return accumulate_all<F16Rows>(p, num_heads, elems, reb, rows, hd, acc);
  return accumulate_all<BF16Rows>(p, num_heads, elems, reb, rows, hd, acc);
}

}  // namespace hz::kernels::vnni
