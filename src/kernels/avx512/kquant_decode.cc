// K-quant decode and few-token steps (up to 5 tokens at a time) on 512-bit registers with VNNI:
// Q4_K / Q5_K / Q6_K weights against Q8_K activations, 4 rows at a time, bit-identical to
// avx2::matmul_quads (kquant_quads.h).
//
// The AVX2 kernel takes a super-block's integer dot 32 elements at a time: maddubs to int16 pairs,
// a shuffle for each group's scale and madd to int32 (11 operations per 64 elements, on 256-bit
// registers). Here one 512-bit register holds 64 quants: Q4_K/Q5_K's 32 low nibbles (group 2j)
// beside the same bytes' 32 high nibbles (group 2j + 1), so the register lines up with 64
// contiguous activations; Q6_K's two 32-element chunks likewise. vpdpbusd gives each dword lane the
// exact sum of 4 products (|sum| <= 4 * 63 * 128 < 2^15), and vpdpwssd multiplies that lane by its
// group's scale, placed in the low 16 bits of the lane (the high 16 bits are zero, so the lane's
// sign bits meet a zero): 5 operations per 64 elements. The int32 lanes of a super-block sum to the
// same exact integer as the AVX2 kernel's, and the 4 rows' block-order fmas are its fmas, so the
// results have the same bits.
#include <immintrin.h>

#include <cstdint>

#include "base/check.h"
#include "kernels/avx2/kquant_quads.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/avx512/zmm_lanes.h"  // also silences GCC 12's false uninitialized warnings

#if !defined(__AVX512F__) || !defined(__AVX512VNNI__)
#error "kquant_decode.cc needs -mavx512f -mavx512vnni (see the top-level CMakeLists.txt)"
#endif

namespace hz::kernels::vnni {
namespace {

using avx2::kQuadRows;
using avx2::load256;

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Lanes of one row's super-block dot for T tokens.
template <int T>
struct RowSums {
  __m512i isum[T];  // dword lanes summing to the exact integer dot (scales applied)
  __m128i mins16 = _mm_setzero_si128();  // Q4_K / Q5_K: the 8 group mins as int16 (row_mins)
  float d = 0, dmin = 0;
};

// Q4_K / Q5_K: dword lanes summing to sum_g min_g * gsum_g of one row and token.
[[gnu::always_inline]] inline __m128i row_mins(__m128i mins16, __m128i group_sums) {
  return _mm_madd_epi16(mins16, group_sums);
}

// The dword index vectors that spread per-group scales over the lanes of one 64-element step.
// Q4_K / Q5_K step j: lanes 0-7 group 2j, lanes 8-15 group 2j + 1.
inline __m512i scale_index_32(int j) {
  return _mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j,
                          2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j);
}
// Q6_K step (h, m): 128-bit lane L holds group 8h + 4m + L.
inline __m512i scale_index_16(int g0) {
  return _mm512_set_epi32(g0 + 3, g0 + 3, g0 + 3, g0 + 3, g0 + 2, g0 + 2, g0 + 2, g0 + 2, g0 + 1, g0 + 1, g0 + 1, g0 + 1,
                          g0, g0, g0, g0);
}

// Q4_K (kFifthBit false) / Q5_K: one row's super-block against T tokens.
template <class Block, bool kFifthBit, int T>
[[gnu::always_inline]] inline void row_scale_min(const uint8_t* b, const uint8_t* const* xq, RowSums<T>* out) {
  const __m128i sm = avx2::unpack_scale_min(b + offsetof(Block, scales));  // bytes 0-7 scales, 8-15 mins
  const __m512i sc = _mm512_cvtepu8_epi32(sm);                              // (scale, 0) int16 pairs in lanes 0-7
  out->mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
  out->d = avx2::load_f16_scalar(b + offsetof(Block, d));
  out->dmin = avx2::load_f16_scalar(b + offsetof(Block, dmin));
  const uint8_t* qs = b + offsetof(Block, qs);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512i qh;
  if constexpr (kFifthBit) qh = _mm512_broadcast_i64x4(load256(b + offsetof(Block, qh)));
  for (int t = 0; t < T; ++t) out->isum[t] = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) {
    __m512i q = _mm512_broadcast_i64x4(load256(qs + 32 * j));
    q = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xFFFF0000u, q, 4), low4);  // [low nibbles | high nibbles]
    if constexpr (kFifthBit) {
      const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * j))),
                                              _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1))), 1);
      q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, bits), q, _mm512_set1_epi8(16));
    }
    const __m512i s = _mm512_permutexvar_epi32(scale_index_32(j), sc);
    for (int t = 0; t < T; ++t) {
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load512(xq[t] + 64 * j));
      out->isum[t] = _mm512_dpwssd_epi32(out->isum[t], p, s);
    }
  }
}

// Q6_K: quants are u6 - 32; the products are taken on u6 and 32 * sum_g scale_g * bsum_g is
// subtracted, as in the AVX2 kernel.
template <int T>
[[gnu::always_inline]] inline void row_q6_k(const uint8_t* b, const uint8_t* const* xq, const uint8_t* const* xbsums,
                                            RowSums<T>* out) {
  const __m256i s16 = _mm256_cvtepi8_epi16(avx2::load128(b + offsetof(BlockQ6_K, scales)));
  const __m512i sc = _mm512_cvtepu16_epi32(s16);  // (scale, 0) int16 pairs
  out->d = avx2::load_f16_scalar(b + offsetof(BlockQ6_K, d));
  const uint8_t* ql = b + offsetof(BlockQ6_K, ql);
  const uint8_t* qhp = b + offsetof(BlockQ6_K, qh);
  const __m512i low4 = _mm512_set1_epi8(0x0f), low6 = _mm512_set1_epi8(0x3f);
  // Per 16-bit word: chunk 0 takes qh << 4, chunk 1 qh << 2 (c01); chunk 2 qh, chunk 3 qh >> 2 (c23).
  const __m512i shl01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  for (int t = 0; t < T; ++t) out->isum[t] = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512i a = load512(ql + 64 * h);  // [ql chunk a | ql chunk b]
    const __m512i qh = _mm512_broadcast_i64x4(load256(qhp + 32 * h));
    // ternlog 0xCA: where the mask byte bit is 1 take a, else the shifted qh (bits 6-7 cleared after).
    const __m512i c01 =
        _mm512_and_si512(_mm512_ternarylogic_epi32(low4, a, _mm512_sllv_epi16(qh, shl01), 0xCA), low6);
    const __m512i c23 = _mm512_and_si512(
        _mm512_ternarylogic_epi32(low4, _mm512_srli_epi16(a, 4), _mm512_srlv_epi16(qh, shr23), 0xCA), low6);
    const __m512i s01 = _mm512_permutexvar_epi32(scale_index_16(8 * h), sc);
    const __m512i s23 = _mm512_permutexvar_epi32(scale_index_16(8 * h + 4), sc);
    for (int t = 0; t < T; ++t) {
      const __m512i p01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c01, load512(xq[t] + 128 * h));
      const __m512i p23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c23, load512(xq[t] + 128 * h + 64));
      out->isum[t] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(out->isum[t], p01, s01), p23, s23);
    }
  }
  for (int t = 0; t < T; ++t) {
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(xbsums[t]), s16), 5);
    out->isum[t] = _mm512_sub_epi32(out->isum[t], _mm512_zextsi256_si512(offset));
  }
}

// The lane sums of 4 rows in two halves, so that only one row pair's lanes are live at a time:
// join2(a, b) keeps a's and b's lane sums in alternate dwords (8 lanes each), finish4 of two
// such joins gives lane r = the exact sum of row r's 16 lanes (integer adds: any order).
[[gnu::always_inline]] inline __m512i join2(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
[[gnu::always_inline]] inline __m128i finish4(__m512i ab, __m512i cd) {
  const __m512i abcd = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  const __m256i y = _mm256_add_epi32(_mm512_castsi512_si256(abcd), _mm512_extracti64x4_epi64(abcd, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

enum class Kind { kQ4_K, kQ5_K, kQ6_K };

template <Kind K>
constexpr uint64_t block_bytes() {
  return K == Kind::kQ4_K ? sizeof(BlockQ4_K) : K == Kind::kQ5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
}

// Rows w_rows[0..3] (a row repeated to pad) against T activation rows; out[t][r] for r < num_rows.
// `ahead`: the next quad's bytes (avx2::QuadAhead).
template <Kind K, int T>
void quad_tile(int64_t n, const uint8_t* const* w_rows, int num_rows, const uint8_t* const* x_rows, float* const* out,
               const uint8_t* ahead, uint64_t ahead_bytes) {
  constexpr bool kMins = K != Kind::kQ6_K;
  __m128 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
  const int64_t num_steps = n / kQK_K;
  const avx2::QuadAhead prefetch(ahead, ahead_bytes, num_steps);
  for (int64_t s = 0; s < num_steps; ++s) {
    prefetch.step(s);
    const uint8_t* xq[T];
    const uint8_t* xbsums[T];
    __m128 dx[T];
    __m128i group_sums[T];
    for (int t = 0; t < T; ++t) {
      const avx2::Q8KX x = avx2::load_q8_k(x_rows[t], s);
      xq[t] = x.qs;
      xbsums[t] = x.bsums;
      dx[t] = _mm256_castps256_ps128(x.d);
      if constexpr (kMins) group_sums[t] = avx2::x_group_sums(x);
    }
    // Rows 0-1, then 2-3, each pair's lanes joined at once (at most 3 x T lane vectors live).
    __m512i half[2][T];
    float d[kQuadRows], dmin[kQuadRows];
    __m128i mins16[kQuadRows];
    for (int h = 0; h < 2; ++h) {
      RowSums<T> rs[2];
      for (int i = 0; i < 2; ++i) {
        const int r = 2 * h + i;
        const uint8_t* b = w_rows[r] + s * block_bytes<K>();
        if constexpr (K == Kind::kQ4_K) {
          row_scale_min<BlockQ4_K, false, T>(b, xq, &rs[i]);
        } else if constexpr (K == Kind::kQ5_K) {
          row_scale_min<BlockQ5_K, true, T>(b, xq, &rs[i]);
        } else {
          row_q6_k<T>(b, xq, xbsums, &rs[i]);
        }
        d[r] = rs[i].d;
        dmin[r] = rs[i].dmin;
        mins16[r] = rs[i].mins16;
      }
      for (int t = 0; t < T; ++t) half[h][t] = join2(rs[0].isum[t], rs[1].isum[t]);
    }
    const __m128 dw = _mm_setr_ps(d[0], d[1], d[2], d[3]);
    const __m128 dminw = _mm_setr_ps(dmin[0], dmin[1], dmin[2], dmin[3]);
    for (int t = 0; t < T; ++t) {
      const __m128i isum = finish4(half[0][t], half[1][t]);
      __m128i msum = _mm_setzero_si128();
      if constexpr (kMins) {
        msum = avx2::sum4_epi32(row_mins(mins16[0], group_sums[t]), row_mins(mins16[1], group_sums[t]),
                                row_mins(mins16[2], group_sums[t]), row_mins(mins16[3], group_sums[t]));
      }
      acc[t] = avx2::fold_quad<kMins>(acc[t], dw, dminw, dx[t], isum, msum);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(16) float lanes[kQuadRows];
    _mm_store_ps(lanes, acc[t]);
    for (int r = 0; r < num_rows; ++r) out[t][r] = lanes[r];
  }
}

template <Kind K>
struct Tile {
  // Tokens at once: the 4 rows' lane vectors of 5 tokens still fit in the 32 registers (rows are
  // joined two by two); llama-1b Q4_K_M, 2 threads, Zen 5: see vnni_kernels.h.
  static constexpr int kMaxTokens = 5;
  template <int T>
  static void run(int64_t n, const uint8_t* const* w_rows, int num_rows, const uint8_t* const* x_rows,
                  float* const* out, const uint8_t* ahead, uint64_t ahead_bytes) {
    quad_tile<K, T>(n, w_rows, num_rows, x_rows, out, ahead, ahead_bytes);
  }
};

template <Kind K>
void matmul_quads(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                  uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  avx2::for_each_quad<Tile<K>>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

}  // namespace

void matmul_kquant_few(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                       const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK_K == 0);
  switch (wtype) {
    case DType::kQ4_K:
      return matmul_quads<Kind::kQ4_K>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ5_K:
      return matmul_quads<Kind::kQ5_K>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ6_K:
      return matmul_quads<Kind::kQ6_K>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    default:
      HZ_CHECK_MSG(false, "vnni::matmul_kquant_few: not a k-quant");
  }
}

}  // namespace hz::kernels::vnni
