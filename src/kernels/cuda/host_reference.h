// Host implementations of the CUDA kernels' contracts that have no CPU kernel of the same shape:
// RoPE from per-pair frequencies, bias rows, the paged KV write and paged attention over the
// block-descriptor table. Each repeats its kernel's operations in the kernel's order (the same
// tiles, segments, fmas and roundings; only expf/sinf/cosf may differ by ulps from the GPU's), so
// the host backend computes what the GPU computes and tests can hold either to the other.
#pragma once

#include <cstdint>

#include "kernels/cuda/launch.h"

namespace hz::cuda::host {

// cuda::rope: x[num_tokens][num_heads][head_dim] rotated in place as hz::Rope::apply does.
void rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
          int32_t rot_dim, float mscale, bool neox);
// cuda::kv_write: every arena pointer in `a` is host memory.
void kv_write(const KvWriteArgs& a);
// cuda::paged_attention with the simple kernel (paged_attention_kernel, then merge_kernel), same
// partial layout.
void paged_attention(const PagedAttnArgs& a);
// The same with the chunked kernel: attention_lanes.h's phases, each run for threads
// 0..num_threads-1 in turn (the end of a phase is the kernel's barrier), then the same merge.
void paged_attention_chunked(const PagedAttnArgs& a, int num_threads = kAttnThreads);

}  // namespace hz::cuda::host
