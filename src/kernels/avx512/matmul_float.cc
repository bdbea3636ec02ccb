// AVX-512 matmul for float weights (F32, F16, BF16; f32 activations), bit-identical to the AVX2
// kernel (avx2/matmul.cc) and so to vec_dot: every output keeps the AVX2 kernel's own 8-lane
// accumulator, fed the same 8-element steps in the same order, finished by the same hsum.
//
// A 512-bit register holds the accumulators of two weight rows for one token: lanes 0-7 are row a's
// 8 lanes, lanes 8-15 row b's. One FMA then advances both rows' chains by one step with their
// own weights (the two rows' 8 values at the step, converted together) against the token's 8
// activations broadcast to both halves. No lane ever meets another lane's products, so the
// arithmetic of each output is the AVX2 kernel's, only twice as many of them per instruction.
// On cores with two 512-bit FMA pipes that doubles the rate of the compute-bound (prefill) case.
// Decode (few tokens) is memory-bound; half the instructions per byte still helped there (Intel
// Xeon, llama-1b F16, tg32: 12.9 -> 13.4 tok/s), and the AVX2 kernel's prefetch of the next tile
// made it slower here (11.9).
//
// matmul_float_token_pairs turns the register the other way: lanes 0-7 token a, lanes 8-15 token b,
// one weight row. Each step then converts a row's 8 weights once into both halves and loads two
// tokens' activations side by side, where the row-pair kernel broadcasts every token's
// activations (a load and a shuffle per FMA pair). Same lanes, same chains, same bits.
#include <immintrin.h>

#include "base/check.h"
#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/avx512/zmm_lanes.h"

#if !defined(__AVX512F__)
#error "matmul_float.cc needs -mavx512f (see the top-level CMakeLists.txt)"
#endif

namespace hz::kernels::vnni {
namespace {

using avx2::hsum;

// The 16 bytes at p in both 128-bit halves.
inline __m256i both_halves128(const uint8_t* p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// A weight kind: step s (8 elements) of rows a and b as one 16-lane register, and the zero-padded
// last step of one row exactly as the AVX2 kind loads it.
struct PairF16 {
  static __m512 load(const uint8_t* a, const uint8_t* b, int64_t s) { return pair_f16(a + s * 16, b + s * 16); }
  static __m512 both(const uint8_t* row, int64_t s) {
    return _mm512_cvtph_ps(both_halves128(row + s * 16));
  }
  static __m256 tail(const uint8_t* row, int64_t s, int64_t count) {
    return avx2::load_f16_partial(reinterpret_cast<const uint16_t*>(row) + s * 8, count);
  }
};
struct PairBF16 {
  static __m512 load(const uint8_t* a, const uint8_t* b, int64_t s) { return pair_bf16(a + s * 16, b + s * 16); }
  static __m512 both(const uint8_t* row, int64_t s) {
    return widen_bf16(both_halves128(row + s * 16));
  }
  static __m256 tail(const uint8_t* row, int64_t s, int64_t count) {
    return avx2::load_bf16_partial(reinterpret_cast<const uint16_t*>(row) + s * 8, count);
  }
};
struct PairF32 {
  static __m512 load(const uint8_t* a, const uint8_t* b, int64_t s) { return pair_f32(a + s * 32, b + s * 32); }
  static __m512 both(const uint8_t* row, int64_t s) { return bcast8(reinterpret_cast<const float*>(row) + s * 8); }
  static __m256 tail(const uint8_t* row, int64_t s, int64_t count) {
    return avx2::load_f32_partial(reinterpret_cast<const float*>(row) + s * 8, count);
  }
};

// The token's 8 activations of step s in both halves.
inline __m512 bcast_x(const uint8_t* row, int64_t s) { return bcast8(reinterpret_cast<const float*>(row) + s * 8); }

// Tiles of up to 2 row pairs x kMaxTokens tokens: 24 accumulators of the 32 registers.
constexpr int kMaxPairs = 2;
constexpr int kMaxTokens = 12;

// w_rows[2p], w_rows[2p + 1]: pair p (the same row twice when the range has an odd row left, whose
// high half is then dropped: out entry null). out[(2p + h) * T + t] receives row 2p+h, token t.
template <class K, int P, int T>
void pair_tile(int64_t n, const uint8_t* const* w_rows, const uint8_t* const* x_rows, float* const* out) {
  __m512 acc[P][T];
  HZ_UNROLL
  for (int p = 0; p < P; ++p) {
    HZ_UNROLL
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  const int64_t num_steps = n / 8;
  for (int64_t s = 0; s < num_steps; ++s) {
    __m512 wv[P];
    HZ_UNROLL
    for (int p = 0; p < P; ++p) wv[p] = K::load(w_rows[2 * p], w_rows[2 * p + 1], s);
    HZ_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 xv = bcast_x(x_rows[t], s);
      HZ_UNROLL
      for (int p = 0; p < P; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], xv, acc[p][t]);
    }
  }
  const int64_t rest = n - num_steps * 8;
  if (rest > 0) {
    __m512 wv[P];
    HZ_UNROLL
    for (int p = 0; p < P; ++p) {
      wv[p] = join(K::tail(w_rows[2 * p], num_steps, rest), K::tail(w_rows[2 * p + 1], num_steps, rest));
    }
    HZ_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m256 x8 = avx2::load_f32_partial(reinterpret_cast<const float*>(x_rows[t]) + num_steps * 8, rest);
      const __m512 xv = join(x8, x8);
      HZ_UNROLL
      for (int p = 0; p < P; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], xv, acc[p][t]);
    }
  }
  HZ_UNROLL
  for (int p = 0; p < P; ++p) {
    HZ_UNROLL
    for (int t = 0; t < T; ++t) {
      out[2 * p * T + t][0] = hsum(_mm512_castps512_ps256(acc[p][t]));
      if (out[(2 * p + 1) * T + t] != nullptr) out[(2 * p + 1) * T + t][0] = hsum(high_half(acc[p][t]));
    }
  }
}

// Token pairs: a register holds one row's accumulators for two tokens (lanes 0-7 token a, 8-15
// token b), fed the row's 8 weights of the step in both halves against the two tokens' 8
// activations. Same per-lane arithmetic as pair_tile. w_rows[r] (R of them); x_rows[2q],
// x_rows[2q + 1]: token pair q (the same token twice when the tile has an odd token left, whose
// high half is then dropped: out entry null). out[r * 2Q + 2q + h] receives row r, token 2q + h.
template <class K, int R, int Q>
void token_pair_tile(int64_t n, const uint8_t* const* w_rows, const uint8_t* const* x_rows, float* const* out) {
  __m512 acc[R][Q];
  HZ_UNROLL
  for (int r = 0; r < R; ++r) {
    HZ_UNROLL
    for (int q = 0; q < Q; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  const int64_t num_steps = n / 8;
  for (int64_t s = 0; s < num_steps; ++s) {
    __m512 wv[R];
    HZ_UNROLL
    for (int r = 0; r < R; ++r) wv[r] = K::both(w_rows[r], s);
    HZ_UNROLL
    for (int q = 0; q < Q; ++q) {
      const __m512 xv = pair_f32(x_rows[2 * q] + s * 32, x_rows[2 * q + 1] + s * 32);
      HZ_UNROLL
      for (int r = 0; r < R; ++r) acc[r][q] = _mm512_fmadd_ps(wv[r], xv, acc[r][q]);
    }
  }
  const int64_t rest = n - num_steps * 8;
  if (rest > 0) {
    __m512 wv[R];
    HZ_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256 w8 = K::tail(w_rows[r], num_steps, rest);
      wv[r] = join(w8, w8);
    }
    HZ_UNROLL
    for (int q = 0; q < Q; ++q) {
      const __m512 xv = join(avx2::load_f32_partial(reinterpret_cast<const float*>(x_rows[2 * q]) + num_steps * 8, rest),
                             avx2::load_f32_partial(reinterpret_cast<const float*>(x_rows[2 * q + 1]) + num_steps * 8, rest));
      HZ_UNROLL
      for (int r = 0; r < R; ++r) acc[r][q] = _mm512_fmadd_ps(wv[r], xv, acc[r][q]);
    }
  }
  HZ_UNROLL
  for (int r = 0; r < R; ++r) {
    HZ_UNROLL
    for (int q = 0; q < Q; ++q) {
      out[r * 2 * Q + 2 * q][0] = hsum(_mm512_castps512_ps256(acc[r][q]));
      if (out[r * 2 * Q + 2 * q + 1] != nullptr) out[r * 2 * Q + 2 * q + 1][0] = hsum(high_half(acc[r][q]));
    }
  }
}

// f.template operator()<A, B>() for the tile shape (a, b), 1 <= a <= MaxA and 1 <= b <= MaxB: the
// tile kernels take their shape as template arguments, so that the accumulators stay in registers.
template <int MaxA, int MaxB, int A = 1, int B = 1, class F>
void with_tile_shape(int a, int b, F& f) {
  if (a == A && b == B) return f.template operator()<A, B>();
  if constexpr (B < MaxB) {
    return with_tile_shape<MaxA, MaxB, A, B + 1>(a, b, f);
  } else if constexpr (A < MaxA) {
    return with_tile_shape<MaxA, MaxB, A + 1, 1>(a, b, f);
  }
}

// The AVX2 kernel's loop order (token blocks of about 384 KiB of activations outer, row tiles, then
// token tiles); it decides only which outputs are computed together.
constexpr uint64_t kTokenBlockBytes = 384 * 1024;

// Tokens per block: about kTokenBlockBytes of activations, a whole number of `tile` tokens (at
// least one tile).
inline int64_t token_block(uint64_t x_row_bytes, int64_t num_tokens, int64_t tile) {
  const int64_t block = x_row_bytes > 0 ? static_cast<int64_t>(kTokenBlockBytes / x_row_bytes) : num_tokens;
  return block < tile ? tile : block / tile * tile;
}

// Token-pair tiles: up to kTileR rows x kTileQ token pairs (24 accumulators, 6 weight registers and
// one activation pair: 31 of the 32 registers). Zen 5, F16 2048x2048 and 8192x2048, 512 tokens, 2
// threads, best GOP/s: 6 x 4 300-345, 7 x 3 293-309, 5 x 4 291-297, 4 x 6 252-311, 8 x 3 258-269
// (spills), 3 x 8 175-178 (spills); the row-pair kernel 241-272.
constexpr int kTileR = 6;
constexpr int kTileQ = 4;

template <class K>
void matmul_pairs(int64_t n, const uint8_t* wb, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                  const uint8_t* xb, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  constexpr int kRows = 2 * kMaxPairs;
  const int64_t block = token_block(x_row_bytes, num_tokens, kMaxTokens);
  for (int64_t tb = 0; tb < num_tokens; tb += block) {
    const int64_t tb_end = num_tokens - tb < block ? num_tokens : tb + block;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int nr = static_cast<int>(row_end - r0 < kRows ? row_end - r0 : kRows);
      const int pairs = (nr + 1) / 2;
      const uint8_t* w_rows[kRows];
      for (int r = 0; r < 2 * pairs; ++r) w_rows[r] = wb + (r0 + (r < nr ? r : nr - 1)) * w_row_bytes;
      for (int64_t t0 = tb; t0 < tb_end; t0 += kMaxTokens) {
        const int nt = static_cast<int>(tb_end - t0 < kMaxTokens ? tb_end - t0 : kMaxTokens);
        const uint8_t* x_rows[kMaxTokens];
        float* out[kRows * kMaxTokens];
        for (int t = 0; t < nt; ++t) x_rows[t] = xb + (t0 + t) * x_row_bytes;
        for (int r = 0; r < 2 * pairs; ++r) {
          for (int t = 0; t < nt; ++t) out[r * nt + t] = r < nr ? y + (t0 + t) * y_stride + r0 + r : nullptr;
        }
        auto tile = [&]<int P, int T>() { pair_tile<K, P, T>(n, w_rows, x_rows, out); };
        with_tile_shape<kMaxPairs, kMaxTokens>(pairs, nt, tile);
      }
    }
  }
}

// matmul_pairs' loop order with token-pair tiles.
template <class K>
void matmul_token_pairs(int64_t n, const uint8_t* wb, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                        const uint8_t* xb, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  constexpr int kTokens = 2 * kTileQ;
  const int64_t block = token_block(x_row_bytes, num_tokens, kTokens);
  for (int64_t tb = 0; tb < num_tokens; tb += block) {
    const int64_t tb_end = num_tokens - tb < block ? num_tokens : tb + block;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileR) {
      const int nr = static_cast<int>(row_end - r0 < kTileR ? row_end - r0 : kTileR);
      const uint8_t* w_rows[kTileR];
      for (int r = 0; r < nr; ++r) w_rows[r] = wb + (r0 + r) * w_row_bytes;
      for (int64_t t0 = tb; t0 < tb_end; t0 += kTokens) {
        const int nt = static_cast<int>(tb_end - t0 < kTokens ? tb_end - t0 : kTokens);
        const int pairs = (nt + 1) / 2;
        const uint8_t* x_rows[kTokens];
        float* out[kTileR * kTokens];
        for (int t = 0; t < 2 * pairs; ++t) x_rows[t] = xb + (t0 + (t < nt ? t : nt - 1)) * x_row_bytes;
        for (int r = 0; r < nr; ++r) {
          for (int t = 0; t < 2 * pairs; ++t) out[r * 2 * pairs + t] = t < nt ? y + (t0 + t) * y_stride + r0 + r : nullptr;
        }
        auto tile = [&]<int R, int Q>() { token_pair_tile<K, R, Q>(n, w_rows, x_rows, out); };
        with_tile_shape<kTileR, kTileQ>(nr, pairs, tile);
      }
    }
  }
}

// Short rows (n of a few hundred: the weights sit in L1/L2 and a row is a handful of steps): the
// tile kernels above spend as much time on the per-output hsum and store as on the FMAs, and a
// 4-row AVX2 tile of one token runs 4 dependent FMA chains, half the rate of the two pipes. Here a
// tile is 16 rows of 1-2 tokens: 8 row-pair registers per token (8 or 16 chains), and the 16
// outputs of a token are reduced together by one transposed tree and stored by one instruction.
// The tree is hsum's, output by output, in its operand order: (lane i + lane i+4), then (0 + 2,
// 1 + 3), then (0 + 1), so every output has the AVX2 kernel's bits.
constexpr int kShortRows = 16;
constexpr int kShortTokens = 2;

// The 16 outputs of acc[p] (lanes 0-7 row 2p, lanes 8-15 row 2p + 1), in row order.
inline __m512 reduce_row_pairs(const __m512* acc) {
  // Lane i + lane i + 4 of each row: 128-bit lanes (0, 2) + (1, 3) of a register are the two rows'
  // low + high halves; two registers give 4 rows.
  __m512 u[4];
  HZ_UNROLL
  for (int i = 0; i < 4; ++i) {
    const __m512 a = acc[2 * i], b = acc[2 * i + 1];
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Now 128-bit lane k of u[i] is row 4i + k's four partial sums. Lanes 0 + 2 and 1 + 3.
  __m512 v[2];
  HZ_UNROLL
  for (int i = 0; i < 2; ++i) {
    const __m512 a = u[2 * i], b = u[2 * i + 1];
    v[i] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // 128-bit lane k of v[i]: rows 8i + k (elements 0, 1) and 8i + 4 + k (2, 3). Element 0 + 1.
  const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Element 4k + j of z is row 4j + k.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, z);
}

// Rows w_rows[0..15] (the last valid row repeated past the range) against T tokens; the first
// `rows` outputs of token t go to y_rows[t].
template <class K, int T>
void short_rows_tile(int64_t n, const uint8_t* const* w_rows, const uint8_t* const* x_rows, float* const* y_rows,
                     int rows) {
  __m512 acc[T][kShortRows / 2];
  HZ_UNROLL
  for (int t = 0; t < T; ++t) {
    HZ_UNROLL
    for (int p = 0; p < kShortRows / 2; ++p) acc[t][p] = _mm512_setzero_ps();
  }
  const int64_t num_steps = n / 8;
  for (int64_t s = 0; s < num_steps; ++s) {
    __m512 xv[T];
    HZ_UNROLL
    for (int t = 0; t < T; ++t) xv[t] = bcast_x(x_rows[t], s);
    HZ_UNROLL
    for (int p = 0; p < kShortRows / 2; ++p) {
      const __m512 wv = K::load(w_rows[2 * p], w_rows[2 * p + 1], s);
      HZ_UNROLL
      for (int t = 0; t < T; ++t) acc[t][p] = _mm512_fmadd_ps(wv, xv[t], acc[t][p]);
    }
  }
  const int64_t rest = n - num_steps * 8;
  if (rest > 0) {
    __m512 xv[T];
    HZ_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m256 x8 = avx2::load_f32_partial(reinterpret_cast<const float*>(x_rows[t]) + num_steps * 8, rest);
      xv[t] = join(x8, x8);
    }
    HZ_UNROLL
    for (int p = 0; p < kShortRows / 2; ++p) {
      const __m512 wv = join(K::tail(w_rows[2 * p], num_steps, rest), K::tail(w_rows[2 * p + 1], num_steps, rest));
      HZ_UNROLL
      for (int t = 0; t < T; ++t) acc[t][p] = _mm512_fmadd_ps(wv, xv[t], acc[t][p]);
    }
  }
  const __mmask16 keep = rows >= kShortRows ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << rows) - 1);
  HZ_UNROLL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y_rows[t], keep, reduce_row_pairs(acc[t]));
}

template <class K>
void matmul_short_rows(int64_t n, const uint8_t* wb, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                       const uint8_t* xb, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kShortTokens) {
    const int nt = static_cast<int>(num_tokens - t0 < kShortTokens ? num_tokens - t0 : kShortTokens);
    const uint8_t* x_rows[kShortTokens];
    for (int t = 0; t < nt; ++t) x_rows[t] = xb + (t0 + t) * x_row_bytes;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kShortRows) {
      const int nr = static_cast<int>(row_end - r0 < kShortRows ? row_end - r0 : kShortRows);
      const uint8_t* w_rows[kShortRows];
      for (int r = 0; r < kShortRows; ++r) w_rows[r] = wb + (r0 + (r < nr ? r : nr - 1)) * w_row_bytes;
      float* y_rows[kShortTokens];
      for (int t = 0; t < nt; ++t) y_rows[t] = y + (t0 + t) * y_stride + r0;
      if (nt == 2) {
        short_rows_tile<K, 2>(n, w_rows, x_rows, y_rows, nr);
      } else {
        short_rows_tile<K, 1>(n, w_rows, x_rows, y_rows, nr);
      }
    }
  }
}

}  // namespace

namespace {

// Driver<K>(...) for the weight kind of wtype.
template <template <class> class Driver>
void for_kind(const char* what, DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin,
              int64_t row_end, const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  switch (wtype) {
    case DType::kF32:
      return Driver<PairF32>::run(n, wb, w_row_bytes, row_begin, row_end, xb, x_row_bytes, num_tokens, y, y_stride);
    case DType::kF16:
      return Driver<PairF16>::run(n, wb, w_row_bytes, row_begin, row_end, xb, x_row_bytes, num_tokens, y, y_stride);
    case DType::kBF16:
      return Driver<PairBF16>::run(n, wb, w_row_bytes, row_begin, row_end, xb, x_row_bytes, num_tokens, y, y_stride);
    default:
      HZ_CHECK_MSG(false, what);
  }
}

template <class K>
struct RowPairs {
  static constexpr auto run = matmul_pairs<K>;
};
template <class K>
struct TokenPairs {
  static constexpr auto run = matmul_token_pairs<K>;
};
template <class K>
struct ShortRows {
  static constexpr auto run = matmul_short_rows<K>;
};

}  // namespace

void matmul_float(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                  const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  for_kind<RowPairs>("matmul_float: not a float weight type", wtype, n, w, w_row_bytes, row_begin, row_end, x,
                     x_row_bytes, num_tokens, y, y_stride);
}

void matmul_float_token_pairs(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin,
                              int64_t row_end, const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y,
                              int64_t y_stride) {
  for_kind<TokenPairs>("matmul_float_token_pairs: not a float weight type", wtype, n, w, w_row_bytes, row_begin,
                       row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

void matmul_float_short_rows(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin,
                             int64_t row_end, const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y,
                             int64_t y_stride) {
  for_kind<ShortRows>("matmul_float_short_rows: not a float weight type", wtype, n, w, w_row_bytes, row_begin, row_end,
                      x, x_row_bytes, num_tokens, y, y_stride);
}

}  // namespace hz::kernels::vnni
