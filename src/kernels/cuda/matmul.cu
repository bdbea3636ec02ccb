// Matrix products for f32/f16/bf16/q8_0/q4_0 weights and the Q8_0 activation quantizer. Two
// kernels, each with a reduction order per (row, token) that depends on n only, so either gives a
// token the same bits whatever else is in the launch:
// - the streaming kernel (the default): a warp per row or two, coalesced 16-byte / 32-bit loads,
//   integer dot products by __dp4a: decode reads the weights once at close to memory bandwidth;
// - the simple kernel (HORIZON_CUDA_MATMUL=simple): one CTA per output row and tile of tokens, byte
//   loads (thread-strided partials, a fixed warp tree, warps summed in order); the first kernel,
//   kept to compare against.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/matmul_lanes.h"

namespace hz::cuda {
namespace {

using detail::f16_to_f32;
using detail::load_u16;

constexpr int kThreads = kMatmulThreads;
constexpr int kTile = kMatmulTokenTile;
constexpr int kWarps = kThreads / 32;

// kernels::ref::quantize_row_q8_0, one thread per block of 32.
__global__ void quantize_q8_0_kernel(const float* x, BlockQ8_0* y, int64_t num_blocks, int64_t blocks_per_row, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_blocks) return;
  const int64_t row = i / blocks_per_row, b = i % blocks_per_row;
  const float* xb = x + row * n + b * kQK8_0;
  float amax = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) {
    const float a = fabsf(xb[j]);
    amax = amax > a ? amax : a;
  }
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  BlockQ8_0 out;
  out.d = detail::f32_to_f16(d);
  for (int j = 0; j < kQK8_0; ++j) out.qs[j] = static_cast<int8_t>(static_cast<int>(roundf(__fmul_rn(xb[j], id))));
  y[i] = out;
}

// The exact integer sum of one weight block against one activation block.
template <DType W>
__device__ __forceinline__ int32_t block_isum(const uint8_t* wb, const BlockQ8_0& xb) {
  int32_t isum = 0;
  if constexpr (W == DType::kQ8_0) {
    const auto* qs = reinterpret_cast<const int8_t*>(wb + 2);
    for (int j = 0; j < kQK8_0; ++j) isum += static_cast<int32_t>(qs[j]) * xb.qs[j];
  } else {
    const uint8_t* qs = wb + 2;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      isum += ((qs[j] & 0x0f) - 8) * xb.qs[j];
      isum += ((qs[j] >> 4) - 8) * xb.qs[j + kQK4_0 / 2];
    }
  }
  return isum;
}

template <DType W>
__host__ __device__ constexpr int64_t block_bytes() {
  return W == DType::kQ8_0 ? static_cast<int64_t>(sizeof(BlockQ8_0)) : static_cast<int64_t>(sizeof(BlockQ4_0));
}

template <DType W>
__device__ __forceinline__ float weight_at(const uint8_t* row, int64_t i) {
  if constexpr (W == DType::kF32) return reinterpret_cast<const float*>(row)[i];
  if constexpr (W == DType::kF16) return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  if constexpr (W == DType::kBF16) return detail::bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  return 0.0f;
}

template <DType W>
__global__ void __launch_bounds__(kThreads) matmul_kernel(const uint8_t* w, int64_t row_bytes, int64_t m, int64_t n,
                                                          const void* x, int64_t num_tokens, float* y) {
  const int64_t r = blockIdx.x;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t left = num_tokens - t0;
  const int nt = left < kTile ? static_cast<int>(left) : kTile;
  const uint8_t* wrow = w + r * row_bytes;
  float acc[kTile];
#pragma unroll
  for (int k = 0; k < kTile; ++k) acc[k] = 0.0f;
  if constexpr (W == DType::kQ8_0 || W == DType::kQ4_0) {
    const int64_t nb = n / kQK8_0;
    const auto* xq = static_cast<const BlockQ8_0*>(x);
    for (int64_t b = threadIdx.x; b < nb; b += kThreads) {
      const uint8_t* wb = wrow + b * block_bytes<W>();
      const float dw = f16_to_f32(load_u16(wb));
#pragma unroll
      for (int k = 0; k < kTile; ++k) {
        if (k < nt) {
          const BlockQ8_0& xb = xq[(t0 + k) * nb + b];
          const int32_t isum = block_isum<W>(wb, xb);
          acc[k] = __fmaf_rn(__fmul_rn(dw, f16_to_f32(xb.d)), static_cast<float>(isum), acc[k]);
        }
      }
    }
  } else {
    const auto* xf = static_cast<const float*>(x);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      const float wv = weight_at<W>(wrow, i);
#pragma unroll
      for (int k = 0; k < kTile; ++k) {
        if (k < nt) acc[k] = __fmaf_rn(wv, xf[(t0 + k) * n + i], acc[k]);
      }
    }
  }
  __shared__ float partial[kWarps][kTile];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int k = 0; k < kTile; ++k) {
    float v = acc[k];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (lane == 0) partial[warp][k] = v;
  }
  __syncthreads();
  if (threadIdx.x < nt) {
    const int k = threadIdx.x;
    float v = partial[0][k];
    for (int wi = 1; wi < kWarps; ++wi) v = __fadd_rn(v, partial[wi][k]);
    y[(t0 + k) * m + r] = v;
  }
}

template <DType W>
__global__ void block_sums_kernel(const uint8_t* w, int64_t row_bytes, int64_t m, int64_t nb, const BlockQ8_0* x,
                                  int64_t num_tokens, int32_t* isums) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_tokens * m * nb) return;
  const int64_t b = i % nb, r = (i / nb) % m, t = i / (nb * m);
  isums[i] = block_isum<W>(w + r * row_bytes + b * block_bytes<W>(), x[t * nb + b]);
}

// ---- The streaming kernel: warps over rows (the lane layout and arithmetic: matmul_lanes.h) ----
constexpr int kStreamWarps = 4;
constexpr int kStreamThreads = kStreamWarps * 32;

template <DType W, int R, int T>
__global__ void __launch_bounds__(kStreamThreads) matmul_stream_kernel(const uint8_t* w, int64_t row_bytes, int64_t m,
                                                                       int64_t n, const void* x, int64_t num_tokens,
                                                                       bool vec, float* y) {
  const int lane = threadIdx.x & 31;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kStreamWarps + (threadIdx.x >> 5)) * R;
  if (r0 >= m) return;  // a whole warp: nothing below synchronizes the CTA
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * T;
  const int64_t left = num_tokens - t0;
  const int nt = left < T ? static_cast<int>(left) : T;
  const uint8_t* wrow[R];
#pragma unroll
  for (int i = 0; i < R; ++i) wrow[i] = w + (r0 + i < m ? r0 + i : r0) * row_bytes;  // rows past m: computed, not written
  float acc[R][T];
  lanes::lane_partials<W, R, T>(wrow, n, x, t0, nt, vec, lane, acc);
#pragma unroll
  for (int i = 0; i < R; ++i) {
#pragma unroll
    for (int k = 0; k < T; ++k) {
      float v = acc[i][k];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
      if (lane == 0 && k < nt && r0 + i < m) y[(t0 + k) * m + r0 + i] = v;
    }
  }
}

uint32_t blocks_for(int64_t items, int threads) { return static_cast<uint32_t>((items + threads - 1) / threads); }

template <DType W, int R, int T>
void launch_stream_tile(const uint8_t* w, int64_t rb, int64_t m, int64_t n, const void* x, int64_t num_tokens, bool vec,
                        float* y, cudaStream_t st) {
  const dim3 grid(static_cast<uint32_t>((m + R * kStreamWarps - 1) / (R * kStreamWarps)),
                  static_cast<uint32_t>((num_tokens + T - 1) / T));
  matmul_stream_kernel<W, R, T><<<grid, kStreamThreads, 0, st>>>(w, rb, m, n, x, num_tokens, vec, y);
}

// Rows a warp (R) and tokens a weight pass (T) by shape; none of them changes a result (matmul_lanes.h).
// One token (decode): no token loop; two rows a warp on tall matrices (the activations loaded once
// for both), one on the others so that small matrices still spread over every SM. Up to 8 tokens:
// one pass. More (batched decode, prefill): 16, or from 17 tokens 32, a pass, one row a warp
// (registers), so 32 sequences decoding together read the weights once.
template <DType W>
void launch_stream(const uint8_t* w, int64_t rb, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y,
                   cudaStream_t st) {
  const bool vec = lanes::vector_loads(W, w, static_cast<uint64_t>(rb), n, x);
  const bool tall = m >= 8192;
  if (num_tokens == 1) {
    if (tall) return launch_stream_tile<W, 2, 1>(w, rb, m, n, x, num_tokens, vec, y, st);
    return launch_stream_tile<W, 1, 1>(w, rb, m, n, x, num_tokens, vec, y, st);
  }
  if (num_tokens <= 8) {
    if (tall) return launch_stream_tile<W, 2, 8>(w, rb, m, n, x, num_tokens, vec, y, st);
    return launch_stream_tile<W, 1, 8>(w, rb, m, n, x, num_tokens, vec, y, st);
  }
  if (num_tokens <= 16) return launch_stream_tile<W, 1, 16>(w, rb, m, n, x, num_tokens, vec, y, st);
  launch_stream_tile<W, 1, 32>(w, rb, m, n, x, num_tokens, vec, y, st);
}

template <DType W>
void launch_matmul(MatmulKernel kernel, const uint8_t* w, int64_t rb, int64_t m, int64_t n, const void* x,
                   int64_t num_tokens, float* y, cudaStream_t st) {
  if (kernel == MatmulKernel::kStreaming) return launch_stream<W>(w, rb, m, n, x, num_tokens, y, st);
  const dim3 grid(static_cast<uint32_t>(m), static_cast<uint32_t>((num_tokens + kTile - 1) / kTile));
  matmul_kernel<W><<<grid, kThreads, 0, st>>>(w, rb, m, n, x, num_tokens, y);
}

}  // namespace

namespace raw {

int quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n, void* stream) {
  const int64_t num_blocks = rows * (n / kQK8_0);
  quantize_q8_0_kernel<<<blocks_for(num_blocks, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, y, num_blocks, n / kQK8_0, n);
  return static_cast<int>(cudaGetLastError());
}

int matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y,
           MatmulKernel kernel, void* stream) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto rb = static_cast<int64_t>(row_bytes(wtype, n));
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  switch (wtype) {
    case DType::kF32: launch_matmul<DType::kF32>(kernel, wb, rb, m, n, x, num_tokens, y, st); break;
    case DType::kF16: launch_matmul<DType::kF16>(kernel, wb, rb, m, n, x, num_tokens, y, st); break;
    case DType::kBF16: launch_matmul<DType::kBF16>(kernel, wb, rb, m, n, x, num_tokens, y, st); break;
    case DType::kQ8_0: launch_matmul<DType::kQ8_0>(kernel, wb, rb, m, n, x, num_tokens, y, st); break;
    case DType::kQ4_0: launch_matmul<DType::kQ4_0>(kernel, wb, rb, m, n, x, num_tokens, y, st); break;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

int quant_block_sums(DType wtype, const void* w, int64_t m, int64_t n, const BlockQ8_0* x, int64_t num_tokens,
                        int32_t* isums, void* stream) {
  if (wtype != DType::kQ8_0 && wtype != DType::kQ4_0)
    return static_cast<int>(cudaErrorInvalidValue);
  const int64_t nb = n / kQK8_0, items = num_tokens * m * nb;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto rb = static_cast<int64_t>(row_bytes(wtype, n));
  if (wtype == DType::kQ8_0) {
    block_sums_kernel<DType::kQ8_0><<<blocks_for(items, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(wb, rb, m, nb, x, num_tokens, isums);
  } else {
    block_sums_kernel<DType::kQ4_0><<<blocks_for(items, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(wb, rb, m, nb, x, num_tokens, isums);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace raw
}  // namespace hz::cuda
