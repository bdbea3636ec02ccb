// KV encoders and decoders (and the step's row writes into the paged arena), copied operation for
// operation from kernels/ref/kv_codec.cc so the bytes and the decoded values are identical.
// Encoding is sequential per group (int8/int4: one thread per row group, the reference's loop);
// fp8's one scale per call is a max over all rows, reduced in a tree (max with the reference's NaN
// rule is order-independent).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/launch.h"

namespace hz::cuda {
namespace {

using kernels::KvCodec;
constexpr int kThreads = 256;

uint32_t blocks_for(int64_t items, int threads) { return static_cast<uint32_t>((items + threads - 1) / threads); }

// std::max(a, b) as the reference calls it: (a < b) ? b : a. A NaN b never replaces a.
__device__ __forceinline__ float ref_max(float a, float b) { return a < b ? b : a; }

__global__ void encode_elementwise_kernel(KvCodec c, const float* x, int64_t n, uint8_t* elems) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (c == KvCodec::kF32) {
    detail::store_f32(elems + 4 * i, x[i]);
  } else if (c == KvCodec::kF16) {
    detail::store_u16(elems + 2 * i, detail::f32_to_f16(x[i]));
  } else {
    detail::store_u16(elems + 2 * i, detail::f32_to_bf16(x[i]));
  }
}

// fp8: one CTA; max |x| over all rows, scale = amax / 448, elements = E4M3(x / scale).
__global__ void __launch_bounds__(kThreads) encode_fp8_kernel(const float* x, int64_t n, uint8_t* elems, uint8_t* scales) {
  float amax = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) amax = ref_max(amax, fabsf(x[i]));
  __shared__ float part[kThreads];
  part[threadIdx.x] = amax;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] = ref_max(part[threadIdx.x], part[threadIdx.x + w]);
    __syncthreads();
  }
  const float scale = __fdiv_rn(part[0], 448.0f);
  const float inv = scale > 0 ? __fdiv_rn(1.0f, scale) : 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) elems[i] = detail::f32_to_e4m3(__fmul_rn(x[i], inv));
  if (threadIdx.x == 0) detail::store_f32(scales, scale);
}

// One int8/int4 row group of n elements starting at element b of row xr (the reference's loop):
// codes into er, the f16 scale to `scale`. A group owns whole bytes of an int4 row when it starts
// on an even element (the group length is even or the row is one group), so threads of different
// groups never write the same byte; the reference zeroes the row then ORs.
__device__ void encode_group(KvCodec c, const float* xr, uint8_t* er, int64_t b, int64_t n, uint8_t* scale) {
  float d;
  if (c == KvCodec::kInt8) {
    float amax = 0;
    for (int64_t i = 0; i < n; ++i) amax = ref_max(amax, fabsf(xr[b + i]));
    d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0 ? __fdiv_rn(1.0f, d) : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      er[b + i] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(roundf(__fmul_rn(xr[b + i], id)))));
    }
  } else {
    float amax = 0, vmax = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (fabsf(xr[b + i]) > amax) {
        amax = fabsf(xr[b + i]);
        vmax = xr[b + i];
      }
    }
    d = __fdiv_rn(vmax, -8.0f);
    const float id = d != 0 ? __fdiv_rn(1.0f, d) : 0.0f;
    for (int64_t i = 0; i < n; i += 2) {
      const int q0 = min(15, static_cast<int>(static_cast<int8_t>(static_cast<int>(__fadd_rn(__fmul_rn(xr[b + i], id), 8.5f)))));
      int q1 = 0;
      if (i + 1 < n) q1 = min(15, static_cast<int>(static_cast<int8_t>(static_cast<int>(__fadd_rn(__fmul_rn(xr[b + i + 1], id), 8.5f)))));
      er[(b + i) / 2] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
  detail::store_u16(scale, detail::f32_to_f16(d));
}

// int8/int4: one thread per (row, group).
__global__ void encode_grouped_kernel(KvCodec c, const float* x, int64_t rows, int64_t hd, uint8_t* elems, uint8_t* scales) {
  const int64_t g = hd < 32 ? hd : 32, ng = (hd + g - 1) / g;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * ng) return;
  const int64_t r = idx / ng, gi = idx % ng;
  const int64_t reb = c == KvCodec::kInt8 ? hd : (hd + 1) / 2;
  const int64_t b = gi * g, n = hd - b < g ? hd - b : g;
  encode_group(c, x + r * hd, elems + r * reb, b, n, scales + (r * ng + gi) * 2);
}

__global__ void decode_kernel(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t hd, float* y) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * hd) return;
  switch (c) {
    case KvCodec::kF32: y[idx] = detail::load_f32(elems + 4 * idx); return;
    case KvCodec::kF16: y[idx] = detail::f16_to_f32(detail::load_u16(elems + 2 * idx)); return;
    case KvCodec::kBF16: y[idx] = detail::bf16_to_f32(detail::load_u16(elems + 2 * idx)); return;
    case KvCodec::kFp8: y[idx] = __fmul_rn(detail::e4m3_to_f32(elems[idx]), detail::load_f32(scales)); return;
    case KvCodec::kInt8:
    case KvCodec::kInt4: {
      const int64_t g = hd < 32 ? hd : 32, ng = (hd + g - 1) / g;
      const int64_t r = idx / hd, e = idx % hd;
      const int64_t reb = c == KvCodec::kInt8 ? hd : (hd + 1) / 2;
      const uint8_t* er = elems + r * reb;
      const float d = detail::f16_to_f32(detail::load_u16(scales + (r * ng + e / g) * 2));
      const int q = c == KvCodec::kInt8 ? static_cast<int8_t>(er[e]) : ((er[e / 2] >> ((e & 1) * 4)) & 15) - 8;
      y[idx] = __fmul_rn(static_cast<float>(q), d);
      return;
    }
  }
}

// Where token t's row of KV head h lands: its block (per the tables) and the row of a plane.
struct RowSlot {
  const device::DeviceKvBlock* blk;
  int64_t row;
};
__device__ __forceinline__ RowSlot row_slot(const KvWriteArgs& a, int64_t t, int64_t h) {
  const int64_t pos = a.query_pos[t];
  return {&a.blocks[a.seq_block_begin[a.query_seq[t]] + pos / a.block_tokens], h * a.block_tokens + pos % a.block_tokens};
}

// One thread per (token, KV head, element): the element's K and V values in their block's codec.
__global__ void kv_write_kernel(KvWriteArgs a) {
  const int64_t hd = a.head_dim;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.num_tokens * a.num_kv_heads * hd) return;
  const int64_t d = idx % hd;
  const int64_t th = idx / hd;  // token * num_kv_heads + head
  const auto [blk, row] = row_slot(a, th / a.num_kv_heads, th % a.num_kv_heads);
  const KvCodec c = a.codec;
  const int64_t width = c == KvCodec::kF32 ? 4 : 2;
  uint8_t* kd = a.arena + blk->k_elems + a.layer_offset + (row * hd + d) * width;
  uint8_t* vd = a.arena + blk->v_elems + a.layer_offset + (row * hd + d) * width;
  if (c == KvCodec::kF32) {
    detail::store_f32(kd, a.k[idx]);
    detail::store_f32(vd, a.v[idx]);
  } else if (c == KvCodec::kF16) {
    detail::store_u16(kd, detail::f32_to_f16(a.k[idx]));
    detail::store_u16(vd, detail::f32_to_f16(a.v[idx]));
  } else if (c == KvCodec::kBF16) {
    detail::store_u16(kd, detail::f32_to_bf16(a.k[idx]));
    detail::store_u16(vd, detail::f32_to_bf16(a.v[idx]));
  }
}

// int8/int4: one thread per (token, KV head, stream, scale group), encode_group for the group, the
// scale at the row's group slot of the block's scale area.
__global__ void kv_write_grouped_kernel(KvWriteArgs a) {
  const int64_t hd = a.head_dim;
  const int64_t g = hd < 32 ? hd : 32, ng = (hd + g - 1) / g;
  const int64_t reb = a.codec == KvCodec::kInt8 ? hd : (hd + 1) / 2;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.num_tokens * a.num_kv_heads * 2 * ng) return;
  const int64_t gi = idx % ng;
  const int64_t st = (idx / ng) % 2;
  const int64_t th = idx / ng / 2;  // token * num_kv_heads + head
  const auto [blk, row] = row_slot(a, th / a.num_kv_heads, th % a.num_kv_heads);
  const float* xr = (st == 0 ? a.k : a.v) + th * hd;
  uint8_t* er = a.arena + (st == 0 ? blk->k_elems : blk->v_elems) + a.layer_offset + row * reb;
  uint8_t* sc = a.arena + (st == 0 ? blk->k_scales : blk->v_scales) + a.layer_offset + (row * ng + gi) * 2;
  const int64_t b = gi * g, n = hd - b < g ? hd - b : g;
  encode_group(a.codec, xr, er, b, n, sc);
}

// fp8: one warp per (token, KV head, stream) row, encode_fp8_kernel's recipe over the row alone:
// max |x| (each lane folds its elements into 0 as the reference does, so no NaN enters the
// shuffles and the maximum is the reference's whatever the order), scale = amax / 448 at the
// row's scale slot (one f32 per row), elements E4M3(x / scale).
constexpr int kWarp = 32;
__global__ void kv_write_fp8_kernel(KvWriteArgs a) {
  const int64_t hd = a.head_dim;
  const int64_t idx = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (idx >= a.num_tokens * a.num_kv_heads * 2) return;  // uniform across the warp
  const int64_t st = idx % 2;
  const int64_t th = idx / 2;  // token * num_kv_heads + head
  const auto [blk, row] = row_slot(a, th / a.num_kv_heads, th % a.num_kv_heads);
  const float* xr = (st == 0 ? a.k : a.v) + th * hd;
  uint8_t* er = a.arena + (st == 0 ? blk->k_elems : blk->v_elems) + a.layer_offset + row * hd;
  float amax = 0;
  for (int64_t i = lane; i < hd; i += kWarp) amax = ref_max(amax, fabsf(xr[i]));
  for (int w = kWarp / 2; w > 0; w /= 2) amax = ref_max(amax, __shfl_xor_sync(0xffffffffu, amax, w));
  const float scale = __fdiv_rn(amax, 448.0f);
  const float inv = scale > 0 ? __fdiv_rn(1.0f, scale) : 0.0f;
  for (int64_t i = lane; i < hd; i += kWarp) er[i] = detail::f32_to_e4m3(__fmul_rn(xr[i], inv));
  if (lane == 0) detail::store_f32(a.arena + (st == 0 ? blk->k_scales : blk->v_scales) + a.layer_offset + row * 4, scale);
}

}  // namespace

namespace raw {

int kv_write(const KvWriteArgs& a, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (a.codec == KvCodec::kInt8 || a.codec == KvCodec::kInt4) {
    const int64_t n = a.num_tokens * a.num_kv_heads * 2 * kernels::kv_groups(a.head_dim);
    kv_write_grouped_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(a);
  } else if (a.codec == KvCodec::kFp8) {
    const int64_t n = a.num_tokens * a.num_kv_heads * 2 * kWarp;
    kv_write_fp8_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(a);
  } else {
    const int64_t n = a.num_tokens * a.num_kv_heads * a.head_dim;
    kv_write_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(a);
  }
  return static_cast<int>(cudaGetLastError());
}

int encode_kv_rows(KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const int64_t n = rows * head_dim;
  if (c == KvCodec::kFp8) {
    encode_fp8_kernel<<<1, kThreads, 0, st>>>(x, n, elems, scales);
  } else if (c == KvCodec::kInt8 || c == KvCodec::kInt4) {
    const int64_t groups = rows * kernels::kv_groups(head_dim);
    encode_grouped_kernel<<<blocks_for(groups, kThreads), kThreads, 0, st>>>(c, x, rows, head_dim, elems, scales);
  } else {
    encode_elementwise_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(c, x, n, elems);
  }
  return static_cast<int>(cudaGetLastError());
}

int decode_kv_rows(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim, float* y,
                      void* stream) {
  decode_kernel<<<blocks_for(rows * head_dim, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(c, elems, scales, rows, head_dim, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace raw
}  // namespace hz::cuda
