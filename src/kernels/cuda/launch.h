// What the .cu files and the host code share, free of fmt and Status (nvcc cannot parse fmt):
// launch constants, the paged-attention arguments, and the raw launchers the .cu files define.
// Raw launchers enqueue on a stream and return the launch's cudaError_t as an int; callers use the
// Status API of cuda_kernels.h, which checks arguments first (host/cuda_kernels.cc).
#pragma once

#include <cstdint>

#include "device/kv_block_desc.h"
#include "kernels/kv_codec.h"
#include "tensor/dtype.h"

namespace hz::cuda {

// Threads of one matmul CTA and the tokens it computes together: each CTA owns one output row
// for up to kMatmulTokenTile tokens; every (row, token) dot product is reduced the same way
// (thread-strided partials, then a fixed tree) whatever the number of tokens.
constexpr int32_t kMatmulThreads = 128;
constexpr int32_t kMatmulTokenTile = 8;
// The matmul kernels (matmul.cu): streaming (warps over rows, coalesced loads; the default) and
// simple (one CTA per row, byte loads; HORIZON_CUDA_MATMUL=simple). Their sums differ in order, so
// their results differ in the last bits; each is batch invariant on its own.
enum class MatmulKernel : int32_t { kStreaming = 0, kSimple = 1 };
// The paged-attention kernels: chunked (attention_chunked.cu, the default) and simple (attention.cu,
// the first; HORIZON_CUDA_ATTENTION=simple). The same arithmetic value by value in two schedules.
enum class AttentionKernel : int32_t { kChunked = 0, kSimple = 1 };
// Attention: positions of one split (the CPU's super-segment), keys per tile, threads per CTA,
// the largest query block (consecutive queries of one sequence sharing key tiles) and the most
// rows (query heads x queries) of one CTA.
constexpr int32_t kAttnSegmentTokens = 512;
constexpr int32_t kAttnTileTokens = 32;
constexpr int32_t kAttnThreads = 128;
constexpr int32_t kAttnMaxQueryBlock = 16;
constexpr int32_t kAttnMaxRows = 64;

// The 512-position segments of a query at `pos` with a sliding `window` (0: none):
// [attention_first_segment, attention_last_segment].
inline int64_t attention_first_segment(int64_t pos, int64_t window) {
  const int64_t first_key = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
  return first_key / kAttnSegmentTokens;
}
inline int64_t attention_last_segment(int64_t pos) { return pos / kAttnSegmentTokens; }

// Paged causal attention over the block-descriptor table (device/kv_block_table.h). Query i (of
// sequence query_seq[i] at query_pos[i]) attends to keys [first, pos] of its sequence, first =
// pos - window + 1 with a sliding window. Keys are split at fixed 512-position boundaries
// (independent of occupancy and of the batch); each segment runs an online softmax over 32-key tiles
// aligned to absolute positions, and a merge combines segments in position order — so decode
// (query blocks of 1) and prefill (query blocks of consecutive queries) give identical results.
struct PagedAttnArgs {
  const uint8_t* arena = nullptr;                 // base of the KV arena
  uint64_t layer_offset = 0;                      // added to every descriptor offset (ArenaGeometry::layer_offset)
  const device::DeviceKvBlock* blocks = nullptr;  // the upload's blocks
  const int64_t* seq_block_begin = nullptr;       // [num_seqs + 1]
  const int32_t* query_seq = nullptr;             // [num_queries]
  const int64_t* query_pos = nullptr;             // [num_queries]
  const int32_t* qblock_first = nullptr;          // [num_qblocks + 1]
  int32_t num_qblocks = 0;
  int32_t qblock_size = 1;                        // the upload's query block size
  int32_t max_segments = 0;                       // the upload's
  int64_t num_queries = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 0;
  int64_t window = 0;                             // 0: full causal
  float scale = 1.0f;                             // q is multiplied by it (1/sqrt(head_dim) usually)
  const float* q = nullptr;                       // [num_queries][num_heads][head_dim]
  float* partials = nullptr;                      // attention_partial_floats(...) floats of scratch
  float* out = nullptr;                           // [num_queries][num_heads][head_dim]
};

// The K and V rows of a step's tokens written into the arena (one layer): token i (of sequence
// query_seq[i] at query_pos[i], the attention upload's arrays) lands in block
// blocks[seq_block_begin[seq] + pos / block_tokens] at slot pos % block_tokens, every KV head's row
// encoded in `codec` (f32, f16, bf16, fp8, int8, int4: one row at a time, so a row's bytes depend on
// the row alone; int8/int4 group scales and fp8's one scale per row go to the block's scale area,
// device::arena_row_scale_bytes per row). Bit-exact with kernels::ref::encode_kv_rows of the row.
struct KvWriteArgs {
  kernels::KvCodec codec = kernels::KvCodec::kF16;  // every block's (the arena's) codec
  uint8_t* arena = nullptr;
  uint64_t layer_offset = 0;
  const device::DeviceKvBlock* blocks = nullptr;
  const int64_t* seq_block_begin = nullptr;
  const int32_t* query_seq = nullptr;
  const int64_t* query_pos = nullptr;
  int64_t num_tokens = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 0;
  const float* k = nullptr;  // [num_tokens][num_kv_heads][head_dim]
  const float* v = nullptr;
};

namespace raw {
int quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n, void* stream);
int matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y,
           MatmulKernel kernel, void* stream);
int quant_block_sums(DType wtype, const void* w, int64_t m, int64_t n, const BlockQ8_0* x, int64_t num_tokens, int32_t* isums,
                     void* stream);
int rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps, void* stream);
int rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
         int32_t rot_dim, float mscale, bool neox, void* stream);
int hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs, int32_t group,
                   int32_t inverse, void* stream);
int swiglu(float* gate, const float* up, int64_t n, void* stream);
int add(float* y, const float* x, int64_t n, void* stream);
int add_rows(float* y, const float* b, int64_t rows, int64_t n, void* stream);
int embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t num_tokens, float* y,
              void* stream);
int encode_kv_rows(kernels::KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales,
                   void* stream);
int decode_kv_rows(kernels::KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim, float* y,
                   void* stream);
int kv_write(const KvWriteArgs& a, void* stream);
// `smem_bytes`: attention_smem_bytes(qblock_size * group, head_dim) for the simple kernel,
// attn::smem_bytes (attention_lanes.h) for the chunked one. Both then run the merge kernel.
int paged_attention(const PagedAttnArgs& a, int64_t smem_bytes, AttentionKernel kernel, void* stream);
// The chunked kernel's CTAs alone (attention_chunked.cu).
int paged_attention_chunked_ctas(const PagedAttnArgs& a, int64_t smem_bytes, void* stream);
}  // namespace raw

}  // namespace hz::cuda
