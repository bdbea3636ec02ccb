// Row and element kernels: RMSNorm, RoPE, the KV rotation, SwiGLU, residual add, bias rows, embedding lookup.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/launch.h"

namespace hz::cuda {
namespace {

constexpr int kNormThreads = 256;

uint32_t blocks_for(int64_t items, int threads) { return static_cast<uint32_t>((items + threads - 1) / threads); }

// kernels::ref::rms_norm: the sum of squares in double (thread-strided, fixed tree), then the
// reference's float steps.
__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(const float* x, const float* w, float* y, int64_t n, float eps) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * n;
  float* yr = y + row * n;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) sum = __dadd_rn(sum, __dmul_rn(static_cast<double>(xr[i]), static_cast<double>(xr[i])));
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  __shared__ double warp_sum[kNormThreads / 32];
  __shared__ float s_scale;
  if (threadIdx.x % 32 == 0) warp_sum[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = warp_sum[0];
    for (int i = 1; i < kNormThreads / 32; ++i) t += warp_sum[i];
    const float mean = static_cast<float>(t / static_cast<double>(n));
    s_scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
  }
  __syncthreads();
  const float s = s_scale;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    yr[i] = w != nullptr ? __fmul_rn(__fmul_rn(xr[i], s), w[i]) : __fmul_rn(xr[i], s);
  }
}

// One thread per (token, head, pair) of hz::Rope::apply.
__global__ void rope_kernel(float* x, int64_t num_pairs, int32_t num_heads, int32_t head_dim, const int64_t* pos,
                            const float* theta, int32_t half, float mscale, bool neox) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= num_pairs) return;
  const int32_t i = static_cast<int32_t>(idx % half);
  const int64_t th = idx / half;  // token * num_heads + head
  const int64_t t = th / num_heads;
  const float angle = __fmul_rn(static_cast<float>(pos[t]), theta[i]);
  const float cs = __fmul_rn(cosf(angle), mscale);
  const float sn = __fmul_rn(sinf(angle), mscale);
  float* v = x + th * head_dim;
  const int32_t ia = neox ? i : 2 * i;
  const int32_t ib = neox ? i + half : 2 * i + 1;
  const float a = v[ia], b = v[ib];
  v[ia] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn));
  v[ib] = __fadd_rn(__fmul_rn(a, sn), __fmul_rn(b, cs));
}

// kernels::ref::hadamard_rows of one head row per thread, the reference's loops: signs (forward)
// or after (inverse), then per power-of-two block the butterflies of stride 1, 2, 4, ... and the
// block's scale, float(1 / sqrt(double(len))) as kernels::hadamard_scale computes it.
__global__ void hadamard_heads_kernel(float* x, int64_t rows, int32_t num_heads, int32_t head_dim, const float* signs,
                                      int32_t group, int32_t inverse) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const int32_t h = static_cast<int32_t>(r % num_heads);
  const float* sg = signs + static_cast<int64_t>(h / group) * head_dim;
  float* xr = x + r * head_dim;
  if (inverse == 0) {
    for (int32_t i = 0; i < head_dim; ++i) xr[i] = __fmul_rn(xr[i], sg[i]);
  }
  for (int32_t b = 0; b < head_dim;) {
    int32_t len = 1;
    while (len * 2 <= head_dim - b) len *= 2;
    float* y = xr + b;
    for (int32_t st = 1; st < len; st *= 2) {
      for (int32_t i = 0; i < len; i += 2 * st) {
        for (int32_t j = i; j < i + st; ++j) {
          const float a = y[j], c = y[j + st];
          y[j] = __fadd_rn(a, c);
          y[j + st] = __fsub_rn(a, c);
        }
      }
    }
    const float s = static_cast<float>(__ddiv_rn(1.0, __dsqrt_rn(static_cast<double>(len))));
    for (int32_t i = 0; i < len; ++i) y[i] = __fmul_rn(y[i], s);
    b += len;
  }
  if (inverse != 0) {
    for (int32_t i = 0; i < head_dim; ++i) xr[i] = __fmul_rn(xr[i], sg[i]);
  }
}

__global__ void swiglu_kernel(float* gate, const float* up, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  gate[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]);
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(y[i], x[i]);
}

__global__ void add_rows_kernel(float* y, const float* b, int64_t total, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] = __fadd_rn(y[i], b[i % n]);
}

// One CTA per token; kernels::ref::dequantize_row of its row.
template <DType T>
__global__ void embedding_kernel(const uint8_t* table, int64_t row_bytes, int64_t vocab, int64_t dim, const int32_t* tokens,
                                 float* y) {
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  float* yr = y + t * dim;
  if (id < 0 || id >= vocab) {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = __int_as_float(0x7fc00000);
    return;
  }
  const uint8_t* row = table + static_cast<int64_t>(id) * row_bytes;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float v;
    if constexpr (T == DType::kF32) {
      v = reinterpret_cast<const float*>(row)[i];
    } else if constexpr (T == DType::kF16) {
      v = detail::f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
    } else if constexpr (T == DType::kBF16) {
      v = detail::bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
    } else if constexpr (T == DType::kQ8_0) {
      const uint8_t* b = row + (i / kQK8_0) * static_cast<int64_t>(sizeof(BlockQ8_0));
      v = __fmul_rn(static_cast<float>(static_cast<int8_t>(b[2 + i % kQK8_0])), detail::f16_to_f32(detail::load_u16(b)));
    } else {
      const uint8_t* b = row + (i / kQK4_0) * static_cast<int64_t>(sizeof(BlockQ4_0));
      const int j = static_cast<int>(i % kQK4_0);
      const int q = j < kQK4_0 / 2 ? (b[2 + j] & 0x0f) - 8 : (b[2 + j - kQK4_0 / 2] >> 4) - 8;
      v = __fmul_rn(static_cast<float>(q), detail::f16_to_f32(detail::load_u16(b)));
    }
    yr[i] = v;
  }
}

}  // namespace

namespace raw {

int rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps, void* stream) {
  rms_norm_kernel<<<static_cast<uint32_t>(rows), kNormThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, w, y, n, eps);
  return static_cast<int>(cudaGetLastError());
}

int rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
            int32_t rot_dim, float mscale, bool neox, void* stream) {
  const int32_t half = rot_dim / 2;
  const int64_t pairs = num_tokens * num_heads * half;
  rope_kernel<<<blocks_for(pairs, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, pairs, num_heads, head_dim, pos, theta, half, mscale, neox);
  return static_cast<int>(cudaGetLastError());
}

int hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs, int32_t group,
                   int32_t inverse, void* stream) {
  const int64_t rows = num_tokens * num_heads;
  hadamard_heads_kernel<<<blocks_for(rows, 128), 128, 0, static_cast<cudaStream_t>(stream)>>>(x, rows, num_heads, head_dim,
                                                                                               signs, group, inverse);
  return static_cast<int>(cudaGetLastError());
}

int swiglu(float* gate, const float* up, int64_t n, void* stream) {
  swiglu_kernel<<<blocks_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(gate, up, n);
  return static_cast<int>(cudaGetLastError());
}

int add(float* y, const float* x, int64_t n, void* stream) {
  add_kernel<<<blocks_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(y, x, n);
  return static_cast<int>(cudaGetLastError());
}

int add_rows(float* y, const float* b, int64_t rows, int64_t n, void* stream) {
  add_rows_kernel<<<blocks_for(rows * n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(y, b, rows * n, n);
  return static_cast<int>(cudaGetLastError());
}

int embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t num_tokens,
                 float* y, void* stream) {
  const auto* tb = static_cast<const uint8_t*>(table);
  const auto rb = static_cast<int64_t>(row_bytes(type, dim));
  const auto grid = static_cast<uint32_t>(num_tokens);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  switch (type) {
    case DType::kF32: embedding_kernel<DType::kF32><<<grid, 256, 0, st>>>(tb, rb, vocab, dim, tokens, y); break;
    case DType::kF16: embedding_kernel<DType::kF16><<<grid, 256, 0, st>>>(tb, rb, vocab, dim, tokens, y); break;
    case DType::kBF16: embedding_kernel<DType::kBF16><<<grid, 256, 0, st>>>(tb, rb, vocab, dim, tokens, y); break;
    case DType::kQ8_0: embedding_kernel<DType::kQ8_0><<<grid, 256, 0, st>>>(tb, rb, vocab, dim, tokens, y); break;
    case DType::kQ4_0: embedding_kernel<DType::kQ4_0><<<grid, 256, 0, st>>>(tb, rb, vocab, dim, tokens, y); break;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace raw
}  // namespace hz::cuda
