// The lane arithmetic of the streaming matmul kernel (matmul.cu), compiled for the GPU by nvcc and
// for the host by the C++ compiler, so that CI checks which products each lane takes, in which
// order, and the warp's sum tree against the scalar reference on a machine without a GPU
// (tests/kernels/cuda_matmul_lanes_test.cc). Only the intrinsics differ (lane_ops.h: on the host,
// scalar code with the same results).
//
// The layout, fixed for every launch: a warp owns R output rows for up to T tokens; lane l takes
// - float weights (f32 / f16 / bf16): groups of V = 16 bytes of elements, elements
//   32 V c + V l + v for c = 0, 1, ... and v = 0..V-1;
// - q8_0 / q4_0: quarter l % 4 of blocks 8 c + l / 4, c = 0, 1, ...;
// and accumulates its products in that order with one fma each (q8_0 / q4_0: one per block quarter,
// acc = fma(d_w * d_x, quarter's integer dot, acc)). The 32 lanes are then summed by a fixed xor
// tree (the kernel's shuffles; host_lane_sum here). So a (row, token) result depends on n only — not on R, T, the tokens of a launch
// or whether a group was loaded as one 16-byte vector or element by element.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/lane_ops.h"
#include "tensor/dtype.h"

namespace hz::cuda::lanes {

template <DType W>
inline constexpr bool kQuantized = W == DType::kQ8_0 || W == DType::kQ4_0;

template <DType W>
inline constexpr int64_t kWeightBlockBytes = W == DType::kQ8_0 ? 34 : 18;

// Float weight element types and their values.
template <DType W>
using FloatElem = std::conditional_t<W == DType::kF32, float, uint16_t>;

template <DType W>
HZ_LANE_FN float weight_value(FloatElem<W> e) {
  if constexpr (W == DType::kF32) {
    return e;
  } else if constexpr (W == DType::kF16) {
    return half_to_f32(e);
  } else {
    return bf16_bits_to_f32(e);
  }
}

// One quarter q of a block's integer operands: q4_0 bytes qs[4q, 4q + 4) as low nibbles (against
// x.qs[4q..]) and high nibbles (against x.qs[16 + 4q..]), each minus 8; q8_0 bytes qs[8q, 8q + 8).
template <DType W>
HZ_LANE_FN void weight_quarter(const uint8_t* wb, int q, int* wq) {
  if constexpr (W == DType::kQ4_0) {
    const auto v = static_cast<uint32_t>(load_word_b2(wb + 2 + 4 * q));
    wq[0] = static_cast<int>(vsub4(v & 0x0f0f0f0fu, 0x08080808u));
    wq[1] = static_cast<int>(vsub4((v >> 4) & 0x0f0f0f0fu, 0x08080808u));
  } else {
    wq[0] = load_word_b2(wb + 2 + 8 * q);
    wq[1] = load_word_b2(wb + 2 + 8 * q + 4);
  }
}

template <DType W>
HZ_LANE_FN void act_quarter(const uint8_t* xb, int q, int* xq) {
  if constexpr (W == DType::kQ4_0) {
    xq[0] = load_word_b2(xb + 2 + 4 * q);
    xq[1] = load_word_b2(xb + 2 + 16 + 4 * q);
  } else {
    xq[0] = load_word_b2(xb + 2 + 8 * q);
    xq[1] = load_word_b2(xb + 2 + 8 * q + 4);
  }
}

// Lane `lane`'s partial sums acc[i][k] (zeroed first) for rows wrow[0..R) and tokens t0 + k, k < nt
// (nt <= T). x: q8_0 / q4_0: Q8_0 blocks [tokens][n / 32]; float weights: f32 [tokens][n]. `vec`:
// rows and token rows are 16-byte aligned (16-byte loads); else element by element, same order.
template <DType W, int R, int T>
HZ_LANE_FN void lane_partials(const uint8_t* const* wrow, int64_t n, const void* x, int64_t t0, int nt, bool vec,
                              int lane, float (*acc)[T]) {
  for (int i = 0; i < R; ++i) {
    for (int k = 0; k < T; ++k) acc[i][k] = 0.0f;
  }
  if constexpr (kQuantized<W>) {
    constexpr int64_t kActBytes = 34;  // sizeof(BlockQ8_0)
    const int64_t nb = n / 32;
    const int q = lane & 3;
    const auto* xbytes = static_cast<const uint8_t*>(x);
#if defined(__CUDA_ARCH__)
#pragma unroll 2
#endif
    for (int64_t b = lane >> 2; b < nb; b += 8) {
      float dw[R];
      int wq[R][2];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int i = 0; i < R; ++i) {
        const uint8_t* wb = wrow[i] + b * kWeightBlockBytes<W>;
        dw[i] = half_to_f32(load_u16(wb));
        weight_quarter<W>(wb, q, wq[i]);
      }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int k = 0; k < T; ++k) {
        if (k < nt) {
          const uint8_t* xb = xbytes + ((t0 + k) * nb + b) * kActBytes;
          const float dx = half_to_f32(load_u16(xb));
          int xq[2];
          act_quarter<W>(xb, q, xq);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
          for (int i = 0; i < R; ++i) {
            const int part = dp4a(wq[i][0], xq[0], dp4a(wq[i][1], xq[1], 0));
            acc[i][k] = fma_rn(mul_rn(dw[i], dx), static_cast<float>(part), acc[i][k]);
          }
        }
      }
    }
  } else {
    using Elem = FloatElem<W>;
    constexpr int V = 16 / static_cast<int>(sizeof(Elem));
    const auto* xf = static_cast<const float*>(x);
    for (int64_t e = static_cast<int64_t>(lane) * V; e < n; e += 32 * V) {
      const bool whole = vec && e + V <= n;
      float wv[R][V];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int i = 0; i < R; ++i) {
        const Elem* we = reinterpret_cast<const Elem*>(wrow[i]) + e;
        if (whole) {
          alignas(16) Elem raw[V];  // a 16-byte store target, wherever the compiler puts it
          load16(we, raw);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
          for (int v = 0; v < V; ++v) wv[i][v] = weight_value<W>(raw[v]);
        } else {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
          for (int v = 0; v < V; ++v) wv[i][v] = e + v < n ? weight_value<W>(we[v]) : 0.0f;
        }
      }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int k = 0; k < T; ++k) {
        if (k < nt) {
          const float* xe = xf + (t0 + k) * n + e;
          alignas(16) float xv[V];
          if (whole) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
            for (int v = 0; v < V; v += 4) load16(xe + v, xv + v);
          } else {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
            for (int v = 0; v < V; ++v) xv[v] = e + v < n ? xe[v] : 0.0f;
          }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
          for (int i = 0; i < R; ++i) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
            for (int v = 0; v < V; ++v) {
              if (whole || e + v < n) acc[i][k] = fma_rn(wv[i][v], xv[v], acc[i][k]);
            }
          }
        }
      }
    }
  }
}

// The warp's sum of 32 lane values on the host: the device's xor tree (lane l adds lane l ^ off's
// value, off = 16, 8, 4, 2, 1), whose lane 0 holds the result.
inline float host_lane_sum(const float* v32) {
  float v[32];
  for (int l = 0; l < 32; ++l) v[l] = v32[l];
  for (int off = 16; off > 0; off /= 2) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = add_rn(v[l], v[l ^ off]);
    for (int l = 0; l < 32; ++l) v[l] = next[l];
  }
  return v[0];
}

// Whether lane_partials may take 16-byte loads: rows and every token's activations 16-byte aligned.
inline bool vector_loads(DType w, const void* weights, uint64_t row_bytes, int64_t n, const void* x) {
  if (w == DType::kQ8_0 || w == DType::kQ4_0) return false;
  return row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(weights) % 16 == 0 && n % 4 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

}  // namespace hz::cuda::lanes
