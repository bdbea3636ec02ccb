// The register-tiled matmul driver shared by every weight type's AVX2 kernel. A "kind" describes
// one weight type: how a step (8 floats or one block) of a weight row and of an activation row is
// loaded, and how a (weight, activation) pair is folded into one 8-lane f32 accumulator.
//
// Determinism: each output element owns exactly one accumulator, fed the same steps in the same
// order and reduced by the same hsum, whether it sits in a 1x1 tile (vec_dot) or an RxT tile. Tiles
// only change which elements are computed together, never the arithmetic of any one of them.
#pragma once

#include <cstdint>

#include "kernels/avx2/avx2_common.h"

namespace hz::kernels::avx2 {

// Kind interface:
//   static constexpr int kStep;               elements per step
//   static constexpr bool kHasTail;           n need not be a multiple of kStep (zero-padded last step)
//   static constexpr int kMaxRows, kMaxTokens; largest tile
//   struct W; struct X;                       decoded step of a weight / activation row
//   static W load_w(const uint8_t* row, int64_t step);   static X load_x(const uint8_t* row, int64_t step);
//   static W load_w_tail(const uint8_t* row, int64_t step, int64_t count);  (only with kHasTail)
//   static X load_x_tail(const uint8_t* row, int64_t step, int64_t count);
//   static __m256 fold(const W& w, const X& x, __m256 acc);
//
// `ahead` (may be null): `ahead_bytes` of weights the caller reads next (the next tile's rows),
// prefetched a share per step. A tile reads its R rows as R interleaved streams of a few KB,
// too short for the hardware prefetcher to ramp up on; with few tokens (decode) the loads then
// wait on memory. Prefetching never changes the arithmetic.
// kPrefetch is a template flag so that tiles without it (prefill, vec_dot) keep the loop they had:
// the extra pointer and counters cost the register-bound F16 kind 12% of its prefill speed.
template <class K, int R, int T, bool kPrefetch = false>
void dot_tile(int64_t n, const uint8_t* const* w_rows, const uint8_t* const* x_rows, float* const* out,
              const uint8_t* ahead = nullptr, uint64_t ahead_bytes = 0) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const int64_t num_steps = n / K::kStep;
  // Cache lines of `ahead` per step, so the whole span is requested by the tile's last step.
  const uint64_t ahead_lines = (ahead_bytes + 63) / 64;
  const uint64_t lines_per_step = num_steps > 0 ? (ahead_lines + num_steps - 1) / static_cast<uint64_t>(num_steps) : 0;
  for (int64_t s = 0; s < num_steps; ++s) {
    if constexpr (kPrefetch) {
      const uint64_t l0 = static_cast<uint64_t>(s) * lines_per_step;
      for (uint64_t l = l0; l < l0 + lines_per_step && l < ahead_lines; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
    }
    typename K::X xv[T];
    for (int t = 0; t < T; ++t) xv[t] = K::load_x(x_rows[t], s);
    for (int r = 0; r < R; ++r) {
      const typename K::W wv = K::load_w(w_rows[r], s);
      for (int t = 0; t < T; ++t) acc[r][t] = K::fold(wv, xv[t], acc[r][t]);
    }
  }
  if constexpr (K::kHasTail) {
    const int64_t rest = n - num_steps * K::kStep;
    if (rest > 0) {
      typename K::X xv[T];
      for (int t = 0; t < T; ++t) xv[t] = K::load_x_tail(x_rows[t], num_steps, rest);
      for (int r = 0; r < R; ++r) {
        const typename K::W wv = K::load_w_tail(w_rows[r], num_steps, rest);
        for (int t = 0; t < T; ++t) acc[r][t] = K::fold(wv, xv[t], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[r * T + t][0] = K::finish(acc[r][t]);
  }
}

// Calls dot_tile<K, num_rows, num_tokens> for run-time sizes within the kind's limits.
template <class K, bool kPrefetch = false, int R = 1, int T = 1>
void dot_tile_dispatch(int num_rows, int num_tokens, int64_t n, const uint8_t* const* w_rows,
                       const uint8_t* const* x_rows, float* const* out, const uint8_t* ahead = nullptr,
                       uint64_t ahead_bytes = 0) {
  if (num_rows == R && num_tokens == T) {
    return dot_tile<K, R, T, kPrefetch>(n, w_rows, x_rows, out, ahead, ahead_bytes);
  }
  if constexpr (T < K::kMaxTokens) {
    return dot_tile_dispatch<K, kPrefetch, R, T + 1>(num_rows, num_tokens, n, w_rows, x_rows, out, ahead, ahead_bytes);
  } else if constexpr (R < K::kMaxRows) {
    return dot_tile_dispatch<K, kPrefetch, R + 1, 1>(num_rows, num_tokens, n, w_rows, x_rows, out, ahead, ahead_bytes);
  }
}

template <class K>
void vec_dot_kind(int64_t n, const void* w_row, const void* x_row, float* out) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  const auto* x = static_cast<const uint8_t*>(x_row);
  dot_tile<K, 1, 1>(n, &w, &x, &out);
}

// Token blocks outer (a block of activation rows, about kTokenBlockBytes, stays in L2), then rows
// (a tile of weight rows stays in L1 while the block's tokens pass over it), then tokens. Without the
// token blocks, prefill re-read every activation row from L3 once per weight tile. The loop order
// only decides which outputs are computed together, never the arithmetic of any one of them.
constexpr uint64_t kTokenBlockBytes = 384 * 1024;

template <class K>
void matmul_kind(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  int64_t block = x_row_bytes > 0 ? static_cast<int64_t>(kTokenBlockBytes / x_row_bytes) : num_tokens;
  block = block < K::kMaxTokens ? K::kMaxTokens : block / K::kMaxTokens * K::kMaxTokens;
  for (int64_t tb = 0; tb < num_tokens; tb += block) {
    const int64_t tb_end = num_tokens - tb < block ? num_tokens : tb + block;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += K::kMaxRows) {
      const int nr = static_cast<int>(row_end - r0 < K::kMaxRows ? row_end - r0 : K::kMaxRows);
      const uint8_t* w_rows[K::kMaxRows];
      for (int r = 0; r < nr; ++r) w_rows[r] = wb + (r0 + r) * w_row_bytes;
      // The next tile's rows (contiguous after these), fetched while this tile computes: with
      // decode's one pass over the tokens the weights stream from memory once.
      const int64_t next_rows = row_end - (r0 + nr) < K::kMaxRows ? row_end - (r0 + nr) : K::kMaxRows;
      const uint8_t* ahead = next_rows > 0 && tb_end - tb <= K::kMaxTokens ? wb + (r0 + nr) * w_row_bytes : nullptr;
      const uint64_t ahead_bytes = ahead != nullptr ? static_cast<uint64_t>(next_rows) * w_row_bytes : 0;
      for (int64_t t0 = tb; t0 < tb_end; t0 += K::kMaxTokens) {
        const int nt = static_cast<int>(tb_end - t0 < K::kMaxTokens ? tb_end - t0 : K::kMaxTokens);
        const uint8_t* x_rows[K::kMaxTokens];
        float* out[K::kMaxRows * K::kMaxTokens];
        for (int t = 0; t < nt; ++t) x_rows[t] = xb + (t0 + t) * x_row_bytes;
        for (int r = 0; r < nr; ++r) {
          for (int t = 0; t < nt; ++t) out[r * nt + t] = y + (t0 + t) * y_stride + r0 + r;
        }
        if (ahead != nullptr) {
          dot_tile_dispatch<K, true>(nr, nt, n, w_rows, x_rows, out, ahead, ahead_bytes);
        } else {
          dot_tile_dispatch<K>(nr, nt, n, w_rows, x_rows, out);
        }
      }
    }
  }
}

}  // namespace hz::kernels::avx2
