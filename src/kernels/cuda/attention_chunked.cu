// The chunked paged-attention kernel: attention_lanes.h's phases, a barrier between phases. One CTA
// per (query block, KV head, 512-position segment), as the first kernel (attention.cu), whose merge
// kernel combines the partials.
#include <atomic>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/attention_lanes.h"

namespace hz::cuda {
namespace {

__global__ void __launch_bounds__(kAttnThreads) paged_attention_chunked_kernel(PagedAttnArgs a) {
  extern __shared__ __align__(16) unsigned char chunked_smem[];
  const attn::Cta c = attn::setup(a, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y),
                                  static_cast<int32_t>(blockIdx.z));
  if (!c.active) return;  // uniform across the CTA
  const attn::Mem m = attn::carve(chunked_smem, c.max_rows, c.hd);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  attn::init(c, m, tid, nt);
  __syncthreads();
  int64_t k0, k1;
  attn::key_range(c, m, &k0, &k1);
  for (int64_t c0 = k0 / attn::kTile * attn::kTile; c0 < k1; c0 += c.chunk) {
    attn::scores(c, m, c0, k0, k1, tid, nt);
    __syncthreads();
    attn::tile_max(c, m, c0, tid, nt);
    __syncthreads();
    attn::row_scan(c, m, c0, tid, nt);
    __syncthreads();
    attn::probs(c, m, c0, tid, nt);
    __syncthreads();
    attn::tile_sums(c, m, c0, tid, nt);
    __syncthreads();
    attn::accumulate(c, m, c0, tid, nt);
    __syncthreads();
  }
  attn::write_partials(c, m, tid, nt);
}

}  // namespace

namespace raw {

int paged_attention_chunked_ctas(const PagedAttnArgs& a, int64_t smem_bytes, void* stream) {
  const auto smem = static_cast<size_t>(smem_bytes);
  // Raised once to the most any launch asked for (a launch being captured into a CUDA graph then
  // makes no call other than the launches).
  static std::atomic<size_t> smem_limit{0};
  if (smem > smem_limit.load()) {
    if (cudaError_t e = cudaFuncSetAttribute(paged_attention_chunked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
        e != cudaSuccess) {
      return static_cast<int>(e);
    }
    size_t seen = smem_limit.load();
    while (seen < smem && !smem_limit.compare_exchange_weak(seen, smem)) {
    }
  }
  const dim3 grid(static_cast<uint32_t>(a.num_qblocks), static_cast<uint32_t>(a.num_kv_heads),
                  static_cast<uint32_t>(a.max_segments));
  paged_attention_chunked_kernel<<<grid, kAttnThreads, smem, static_cast<cudaStream_t>(stream)>>>(a);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace raw
}  // namespace hz::cuda
