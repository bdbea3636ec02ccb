// The Q4_K / Q5_K / Q6_K dot kinds against Q8_K activations and the few-token matmul (4 rows at a
// time, up to 3 tokens), shared by the AVX2 (avx2/kquants.cc) and AVX-512 (avx512/matmul_q_vnni.cc)
// translation units. The code is the same; compiled with AVX-512VL it has 32 vector registers
// instead of 16, so a quad's partial sums and activations stay in registers (measured on AMD Zen 4,
// one token: Q6_K 1.3-1.6x, Q4_K 1.0-1.3x the AVX2 build's speed). Same bits either way.
// Include only from files compiled with at least -mavx2 -mfma -mf16c.
//
// A step is one 256-element super-block: integer products are summed exactly into 8 int32 lanes
// with maddubs/madd (each 32- or 16-element group weighted by its integer scale), reduced to one
// exact int32 and folded into the f32 sum by the block-order rule (one fma per term, as the scalar
// reference); the Q4_K/Q5_K mins enter through Q8_K's bsums.
//
// NOTE: internal linkage only (anonymous namespace), as in matmul_kq_groups.h: each TU keeps its own
// copy compiled with its own ISA flags.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/int_lanes.h"
#include "kernels/kernels.h"
#include "kernels/unaligned.h"

namespace hz::kernels::avx2 {
namespace {

// Shuffle mask that broadcasts int16 element g (of each 128-bit lane) to all 8 int16 of the lane.
[[gnu::always_inline]] inline __m256i broadcast_i16_mask(int g_lo, int g_hi) {
  const short lo = static_cast<short>((2 * g_lo) | ((2 * g_lo + 1) << 8));
  const short hi = static_cast<short>((2 * g_hi) | ((2 * g_hi + 1) << 8));
  return _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
}

// Blocks are addressed through byte pointers and offsetof: rows may sit at any byte address.
struct Q8KX {
  const uint8_t* qs;     // 256 int8
  const uint8_t* bsums;  // 16 int16
  __m256 d;
};

[[gnu::always_inline]] inline Q8KX load_q8_k(const uint8_t* row, int64_t s) {
  const uint8_t* b = row + s * sizeof(BlockQ8_K);
  return {b + offsetof(BlockQ8_K, qs), b + offsetof(BlockQ8_K, bsums),
          _mm256_set1_ps(load_f32(b + offsetof(BlockQ8_K, d)))};
}

// Q4_K / Q5_K: 8 groups of 32 with a 6-bit scale and a 6-bit min each.
struct ScaleMinW {
  const uint8_t* qs;  // 128 bytes of low nibbles
  const uint8_t* qh;  // Q5_K: 32 bytes of 5th bits; null for Q4_K
  __m256i scales;     // int16 scales 0..7, in both 128-bit lanes
  __m128i mins;       // int16 mins 0..7
  __m256 d, dmin;
};

// The scales and mins of a Q4_K / Q5_K super-block (unpack_scale_min in int_lanes.h).
template <class Block>
[[gnu::always_inline]] inline ScaleMinW load_scale_min(const uint8_t* b, const uint8_t* qh) {
  // scales 0..7, mins 0..7 as int16
  const __m256i sm16 = _mm256_cvtepu8_epi16(unpack_scale_min(b + offsetof(Block, scales)));
  ScaleMinW w;
  w.qs = b + offsetof(Block, qs);
  w.qh = qh;
  w.scales = _mm256_permute2x128_si256(sm16, sm16, 0x00);
  w.mins = _mm256_extracti128_si256(sm16, 1);
  w.d = _mm256_set1_ps(load_f16_scalar(b + offsetof(Block, d)));
  w.dmin = _mm256_set1_ps(load_f16_scalar(b + offsetof(Block, dmin)));
  return w;
}

// The block-order rule (ref::vec_dot_q4_k_q8_k, and the 8-row group matmuls): the running sum
// lives in lane 0 and takes one fma per term, in super-block order. d and dmin are the products
// d_w * d_x (every lane equal).
[[gnu::always_inline]] inline __m256 fold_block_order(__m256 d, int32_t isum, __m256 dmin, int32_t msum, __m256 acc) {
  float a = _mm256_cvtss_f32(acc);
  a = std::fma(_mm256_cvtss_f32(d), static_cast<float>(isum), a);
  a = std::fma(-_mm256_cvtss_f32(dmin), static_cast<float>(msum), a);
  return _mm256_castps128_ps256(_mm_set_ss(a));
}
[[gnu::always_inline]] inline __m256 fold_block_order(__m256 d, int32_t isum, __m256 acc) {
  return _mm256_castps128_ps256(_mm_set_ss(std::fma(_mm256_cvtss_f32(d), static_cast<float>(isum), _mm256_cvtss_f32(acc))));
}
// The sum of a block-order accumulator.
[[gnu::always_inline]] inline float lane0(__m256 acc) { return _mm256_cvtss_f32(acc); }

// The exact integer terms of one Q4_K / Q5_K super-block's dot: `sumi` (8 int32 lanes summing to
// sum_g scale_g * (q_g . x_g)) and `mins` (4 int32 lanes summing to sum_g min_g * bsum_g).
// `group_sums` is the activation's 8 group sums (x_group_sums). Inlined by force: as a call its
// vectors spill to the stack (measured: half of Q4_K decode time in the call).
template <bool kFifthBit>
[[gnu::always_inline]] inline void isums_scale_min(const ScaleMinW& w, const Q8KX& x, __m128i group_sums, __m256i* sumi_out,
                                                   __m128i* mins_out) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256i sumi = _mm256_setzero_si256();
  __m256i qh;
  if constexpr (kFifthBit) qh = load256(w.qh);
  for (int j = 0; j < 4; ++j) {  // 64 elements: group 2j in low nibbles, group 2j+1 in high nibbles
    const __m256i q4 = load256(w.qs + 32 * j);
    __m256i lo = _mm256_and_si256(q4, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
    if constexpr (kFifthBit) {
      const __m256i bit_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
      const __m256i bit_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1)));
      const __m256i sixteen = _mm256_set1_epi8(16);
      lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_lo), bit_lo), sixteen));
      hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_hi), bit_hi), sixteen));
    }
    // u5 * s8 pairs stay below 2 * 31 * 127 (no int16 saturation).
    const __m256i p_lo = _mm256_maddubs_epi16(lo, load256(x.qs + 64 * j));
    const __m256i p_hi = _mm256_maddubs_epi16(hi, load256(x.qs + 64 * j + 32));
    const __m256i s_lo = _mm256_shuffle_epi8(w.scales, broadcast_i16_mask(2 * j, 2 * j));
    const __m256i s_hi = _mm256_shuffle_epi8(w.scales, broadcast_i16_mask(2 * j + 1, 2 * j + 1));
    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo), _mm256_madd_epi16(p_hi, s_hi)));
  }
  *sumi_out = sumi;
  *mins_out = _mm_madd_epi16(w.mins, group_sums);  // sum over groups of min_g * (the group's bsums pair)
}

// The 8 int16 sums of Q8_K's 32-element groups (pairs of its 16-element bsums).
[[gnu::always_inline]] inline __m128i x_group_sums(const Q8KX& x) {
  const __m256i bsums = load256(x.bsums);
  return _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
}

template <bool kFifthBit>
[[gnu::always_inline]] inline __m256 fold_scale_min(const ScaleMinW& w, const Q8KX& x, __m256 acc) {
  __m256i sumi;
  __m128i mins_dot;
  isums_scale_min<kFifthBit>(w, x, x_group_sums(x), &sumi, &mins_dot);
  return fold_block_order(_mm256_mul_ps(w.d, x.d), hsum_epi32(sumi), _mm256_mul_ps(w.dmin, x.d),
                          hsum_epi32(_mm256_castsi128_si256(mins_dot), 4), acc);
}

struct Q4_KKind {
  static constexpr int kStep = kQK_K;
  static constexpr bool kHasTail = false;
  static constexpr int kMaxRows = 4;  // independent fma chains for decode (the block-order sums are scalar)
  static constexpr int kMaxTokens = 4;
  using W = ScaleMinW;
  using X = Q8KX;
  [[gnu::always_inline]] static W load_w(const uint8_t* row, int64_t s) {
    return load_scale_min<BlockQ4_K>(row + s * sizeof(BlockQ4_K), nullptr);
  }
  [[gnu::always_inline]] static X load_x(const uint8_t* row, int64_t s) { return load_q8_k(row, s); }
  [[gnu::always_inline]] static __m256 fold(const W& w, const X& x, __m256 acc) { return fold_scale_min<false>(w, x, acc); }
  static constexpr bool kMins = true;
  [[gnu::always_inline]] static void isums(const W& w, const X& x, __m128i group_sums, __m256i* sumi, __m128i* mins) {
    isums_scale_min<false>(w, x, group_sums, sumi, mins);
  }
  static float finish(__m256 acc) { return lane0(acc); }
};

struct Q5_KKind {
  static constexpr int kStep = kQK_K;
  static constexpr bool kHasTail = false;
  static constexpr int kMaxRows = 4;  // independent fma chains for decode (the block-order sums are scalar)
  static constexpr int kMaxTokens = 4;
  using W = ScaleMinW;
  using X = Q8KX;
  [[gnu::always_inline]] static W load_w(const uint8_t* row, int64_t s) {
    const uint8_t* b = row + s * sizeof(BlockQ5_K);
    return load_scale_min<BlockQ5_K>(b, b + offsetof(BlockQ5_K, qh));
  }
  [[gnu::always_inline]] static X load_x(const uint8_t* row, int64_t s) { return load_q8_k(row, s); }
  [[gnu::always_inline]] static __m256 fold(const W& w, const X& x, __m256 acc) { return fold_scale_min<true>(w, x, acc); }
  static constexpr bool kMins = true;
  [[gnu::always_inline]] static void isums(const W& w, const X& x, __m128i group_sums, __m256i* sumi, __m128i* mins) {
    isums_scale_min<true>(w, x, group_sums, sumi, mins);
  }
  static float finish(__m256 acc) { return lane0(acc); }
};

// Q6_K: 16 groups of 16 with int8 scales; quants are u6 - 32, so the products are taken on the
// unsigned u6 and 32 * scale_g * (group activation sum, = bsums[g]) is subtracted.
struct Q6_KW {
  const uint8_t* ql;  // 128 bytes
  const uint8_t* qh;  // 64 bytes
  __m256i scales_half[2];  // int16 scales 0..7 (half 0) and 8..15 (half 1), in both lanes
  __m256i scales16;        // int16 scales 0..15
  __m256 d;
};

struct Q6_KKind {
  static constexpr int kStep = kQK_K;
  static constexpr bool kHasTail = false;
  static constexpr int kMaxRows = 4;  // independent fma chains for decode (the block-order sums are scalar)
  static constexpr int kMaxTokens = 4;
  static constexpr bool kMins = false;
  using W = Q6_KW;
  using X = Q8KX;
  [[gnu::always_inline]] static W load_w(const uint8_t* row, int64_t s) {
    const uint8_t* b = row + s * sizeof(BlockQ6_K);
    W w;
    w.ql = b + offsetof(BlockQ6_K, ql);
    w.qh = b + offsetof(BlockQ6_K, qh);
    w.scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(BlockQ6_K, scales))));
    w.scales_half[0] = _mm256_permute2x128_si256(w.scales16, w.scales16, 0x00);
    w.scales_half[1] = _mm256_permute2x128_si256(w.scales16, w.scales16, 0x11);
    w.d = _mm256_set1_ps(load_f16_scalar(b + offsetof(BlockQ6_K, d)));
    return w;
  }
  [[gnu::always_inline]] static X load_x(const uint8_t* row, int64_t s) { return load_q8_k(row, s); }
  // The exact int32 lanes of one super-block's dot (no mins: the u6 offset is taken out here).
  [[gnu::always_inline]] static void isums(const W& w, const X& x, __m128i /*group_sums*/, __m256i* sumi_out,
                                           __m128i* /*mins_out*/) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {  // 128-element halves: 64 ql bytes, 32 qh bytes
      const __m256i qa = load256(w.ql + 64 * h), qb = load256(w.ql + 64 * h + 32);
      const __m256i qh = load256(w.qh + 32 * h);
      // Chunk k holds elements 32k..32k+31 of the half, with qh bits 2k..2k+1 as bits 4..5.
      __m256i c[4];
      c[0] = _mm256_or_si256(_mm256_and_si256(qa, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
      c[1] = _mm256_or_si256(_mm256_and_si256(qb, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
      c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), low4), _mm256_and_si256(qh, bits45));
      c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), low4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
      for (int k = 0; k < 4; ++k) {
        // 2 * 63 * 127 fits int16; each 128-bit lane is one 16-element group.
        const __m256i p = _mm256_maddubs_epi16(c[k], load256(x.qs + 128 * h + 32 * k));
        const __m256i sc = _mm256_shuffle_epi8(w.scales_half[h], broadcast_i16_mask(2 * k, 2 * k + 1));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sc));
      }
    }
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(x.bsums), w.scales16), 5);
    *sumi_out = _mm256_sub_epi32(sumi, offset);
  }
  [[gnu::always_inline]] static __m256 fold(const W& w, const X& x, __m256 acc) {
    __m256i sumi;
    isums(w, x, __m128i{}, &sumi, nullptr);
    return fold_block_order(_mm256_mul_ps(w.d, x.d), hsum_epi32(sumi), acc);
  }
  static float finish(__m256 acc) { return lane0(acc); }
};

// ---- few-token matmuls (decode): 4 rows at a time ----
// The row-at-a-time tile driver (matmul_tile.h, on the kinds above) reduces each super-block's int32
// lanes to scalars and runs the block-order fmas in scalar registers: two horizontal sums and a trip
// through the scalar unit per row and super-block, more work than the dot itself at one token. Here the int32 lanes of 4 rows
// are reduced together (a tree of hadds) and the 4 rows' fmas run in the 4 lanes of one vector.
// Each lane takes exactly the scalar reference's fmas in its order, so the bits do not change.

// Lane r = the sum of v[r]'s 8 lanes (exact).
[[gnu::always_inline]] inline __m128i sum4_epi32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}
// Lane r = the sum of v[r]'s 4 lanes (exact).
[[gnu::always_inline]] inline __m128i sum4_epi32(__m128i a, __m128i b, __m128i c, __m128i d) {
  return _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(c, d));
}

constexpr int kQuadRows = 4;
constexpr int kQuadMaxTokens = kGroupMinTokens - 1;

// Spreads the prefetch of the next quad's bytes over a tile's super-blocks: step s requests its
// share of the lines (see dot_tile).
class QuadAhead {
 public:
  QuadAhead(const uint8_t* ahead, uint64_t ahead_bytes, int64_t num_steps)
      : ahead_(ahead),
        lines_((ahead_bytes + 63) / 64),
        per_step_(num_steps > 0 ? (lines_ + num_steps - 1) / static_cast<uint64_t>(num_steps) : 0) {}
  [[gnu::always_inline]] void step(int64_t s) const {
    const uint64_t l0 = static_cast<uint64_t>(s) * per_step_;
    for (uint64_t l = l0; l < l0 + per_step_ && l < lines_; ++l)
      _mm_prefetch(reinterpret_cast<const char*>(ahead_ + 64 * l), _MM_HINT_T0);
  }

 private:
  const uint8_t* ahead_;
  uint64_t lines_, per_step_;
};

// One super-block's block-order fmas for 4 rows (lane r = row r) and one token: d and dmin are
// the rows' weight scales, dx the token's; isum and msum the exact integer sums (msum only with
// kMins).
template <bool kMins>
[[gnu::always_inline]] inline __m128 fold_quad(__m128 acc, __m128 dw, __m128 dminw, __m128 dx, __m128i isum,
                                               __m128i msum) {
  acc = _mm_fmadd_ps(_mm_mul_ps(dw, dx), _mm_cvtepi32_ps(isum), acc);
  // fnmadd(a, b, c) = -(a b) + c with one rounding: the reference's fma(-dmin, msum, acc).
  if constexpr (kMins) acc = _mm_fnmadd_ps(_mm_mul_ps(dminw, dx), _mm_cvtepi32_ps(msum), acc);
  return acc;
}

// Rows w_rows[0..3] (repeat a row to pad) against T activation rows; out[t][r] for r < num_rows.
// `ahead`: the next quad's bytes (QuadAhead).
template <class K, int T>
void quad_tile(int64_t n, const uint8_t* const* w_rows, int num_rows, const uint8_t* const* x_rows, float* const* out,
               const uint8_t* ahead, uint64_t ahead_bytes) {
  __m128 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
  const int64_t num_steps = n / K::kStep;
  const QuadAhead prefetch(ahead, ahead_bytes, num_steps);
  for (int64_t s = 0; s < num_steps; ++s) {
    prefetch.step(s);
    typename K::X xv[T];
    __m128i group_sums[T];
    for (int t = 0; t < T; ++t) {
      xv[t] = K::load_x(x_rows[t], s);
      if constexpr (K::kMins) group_sums[t] = x_group_sums(xv[t]);
    }
    __m256i sumi[kQuadRows][T];
    __m128i mins[kQuadRows][T];
    float d[kQuadRows], dmin[kQuadRows] = {};
    for (int r = 0; r < kQuadRows; ++r) {
      const typename K::W wv = K::load_w(w_rows[r], s);
      d[r] = _mm256_cvtss_f32(wv.d);
      if constexpr (K::kMins) dmin[r] = _mm256_cvtss_f32(wv.dmin);
      for (int t = 0; t < T; ++t) K::isums(wv, xv[t], group_sums[t], &sumi[r][t], &mins[r][t]);
    }
    const __m128 dw = _mm_setr_ps(d[0], d[1], d[2], d[3]);
    const __m128 dminw = _mm_setr_ps(dmin[0], dmin[1], dmin[2], dmin[3]);
    for (int t = 0; t < T; ++t) {
      const __m128i isum = sum4_epi32(sumi[0][t], sumi[1][t], sumi[2][t], sumi[3][t]);
      __m128i msum = _mm_setzero_si128();
      if constexpr (K::kMins) msum = sum4_epi32(mins[0][t], mins[1][t], mins[2][t], mins[3][t]);
      acc[t] = fold_quad<K::kMins>(acc[t], dw, dminw, _mm256_castps256_ps128(xv[t].d), isum, msum);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(16) float lanes[kQuadRows];
    _mm_store_ps(lanes, acc[t]);
    for (int r = 0; r < num_rows; ++r) out[t][r] = lanes[r];
  }
}

// Tile::template run<nt> for nt in [1, Tile::kMaxTokens].
template <class Tile, int T = 1>
[[gnu::always_inline]] inline void run_tile(int nt, int64_t n, const uint8_t* const* w_rows, int num_rows,
                                            const uint8_t* const* x_rows, float* const* out, const uint8_t* ahead,
                                            uint64_t ahead_bytes) {
  if constexpr (T < Tile::kMaxTokens) {
    if (nt != T) return run_tile<Tile, T + 1>(nt, n, w_rows, num_rows, x_rows, out, ahead, ahead_bytes);
  }
  Tile::template run<T>(n, w_rows, num_rows, x_rows, out, ahead, ahead_bytes);
}

// The few-token driver: rows 4 at a time, tokens up to Tile::kMaxTokens at a time, each quad through
// Tile::template run<T>(n, w_rows, num_rows, x_rows, out, ahead, ahead_bytes) with the next quad's
// bytes as `ahead`.
template <class Tile>
void for_each_quad(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                   uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  constexpr int kMaxTokens = Tile::kMaxTokens;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kQuadRows) {
    const int nr = static_cast<int>(row_end - r0 < kQuadRows ? row_end - r0 : kQuadRows);
    const uint8_t* w_rows[kQuadRows];
    for (int r = 0; r < kQuadRows; ++r) w_rows[r] = wb + (r0 + (r < nr ? r : nr - 1)) * w_row_bytes;
    const int64_t next_rows = row_end - (r0 + nr) < kQuadRows ? row_end - (r0 + nr) : kQuadRows;
    const uint8_t* ahead = wb + (r0 + nr) * w_row_bytes;
    const uint64_t ahead_bytes = next_rows > 0 ? static_cast<uint64_t>(next_rows) * w_row_bytes : 0;
    // Every chunk of tokens over this quad before the next quad: the quad's rows come from memory
    // once and from the cache for the later chunks.
    for (int64_t t0 = 0; t0 < num_tokens; t0 += kMaxTokens) {
      const int nt = static_cast<int>(num_tokens - t0 < kMaxTokens ? num_tokens - t0 : kMaxTokens);
      const uint8_t* x_rows[kMaxTokens];
      float* out[kMaxTokens];
      for (int t = 0; t < nt; ++t) {
        x_rows[t] = xb + (t0 + t) * x_row_bytes;
        out[t] = y + (t0 + t) * y_stride + r0;
      }
      const uint64_t chunk_ahead = t0 == 0 ? ahead_bytes : 0;
      run_tile<Tile>(nt, n, w_rows, nr, x_rows, out, ahead, chunk_ahead);
    }
  }
}

template <class K>
struct QuadTile {
  static constexpr int kMaxTokens = kQuadMaxTokens;
  template <int T>
  static void run(int64_t n, const uint8_t* const* w_rows, int num_rows, const uint8_t* const* x_rows,
                  float* const* out, const uint8_t* ahead, uint64_t ahead_bytes) {
    quad_tile<K, T>(n, w_rows, num_rows, x_rows, out, ahead, ahead_bytes);
  }
};

template <class K>
void matmul_quads(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                  uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  for_each_quad<QuadTile<K>>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

}  // namespace
}  // namespace hz::kernels::avx2
