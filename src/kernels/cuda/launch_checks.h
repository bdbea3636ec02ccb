// Host-side decisions of the CUDA kernels that need no GPU, so CI tests them: argument checks,
// launch shapes, attention query blocks and scratch sizes, CUDA-graph batch buckets. The rules
// fixed here keep results exact: a kernel's reduction order depends on the problem (n, head_dim,
// positions), never on the batch size, the occupancy or the launch shape.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/launch.h"

namespace hz::cuda {

// Weight types the CUDA matmul and embedding read; KV codecs device attention and the encoders handle.
bool weight_type_supported(DType t);
bool kv_codec_supported(kernels::KvCodec c);

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// `rows` rows of `n` elements for kernel `kernel`: both > 0, n a multiple of `multiple`, and few
// enough elements for a 1-D grid of 256-thread CTAs. Errors name the kernel and the value.
Status check_rows_args(const char* kernel, int64_t rows, int64_t n, int64_t multiple = 1);
Status check_rope_args(int64_t num_tokens, int32_t num_heads, int32_t head_dim, int32_t rot_dim);
// The KV rotation: heads a multiple of `group`, head dims 1..256.
Status check_hadamard_args(int64_t num_tokens, int32_t num_heads, int32_t head_dim, int32_t group);
Status check_embedding_args(DType type, int64_t vocab, int64_t dim, int64_t num_tokens);
Status check_kv_codec_args(kernels::KvCodec c, int64_t rows, int64_t head_dim);
// The shape of a KV write (kv_write): heads, head dim and block size as attention takes them.
Status check_kv_write_args(const KvWriteArgs& a);
// y[num_tokens][m] = x[num_tokens][n] . w[m][n]^T.
Status check_matmul_args(DType wtype, int64_t m, int64_t n, int64_t num_tokens);
Dim3 matmul_grid(int64_t m, int64_t num_tokens);

// Head dims 8..256 (even), query heads a multiple of KV heads, at most kAttnMaxRows per KV head.
Status check_attention_shape(int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, int32_t block_tokens);
// The upload-derived sizes of one paged attention launch.
Status check_paged_attention_args(int32_t num_qblocks, int32_t qblock_size, int32_t max_segments, int64_t num_queries,
                                  int32_t group);
// Queries per CTA for a GQA group of `group` heads: 1 for decode, else as many consecutive
// queries as keep rows (queries x group) <= kAttnMaxRows, at most kAttnMaxQueryBlock.
int32_t attention_query_block(int32_t group, bool prefill);
// Dynamic shared memory of one attention CTA of `rows` rows (q rows, accumulators, the score tile,
// per-row state, staged K/V codes and their scales).
int64_t attention_smem_bytes(int32_t rows, int32_t head_dim);
// Floats of the partial-softmax scratch: [num_queries][num_heads][max_segments][head_dim + 2].
int64_t attention_partial_floats(int64_t num_queries, int32_t num_heads, int32_t max_segments, int32_t head_dim);

// Batch-size buckets of the captured decode graphs: 1, 2, 4, 8, 16, 32, 64, 128, 256. A step of
// `batch` sequences replays the smallest bucket >= batch (padding rows compute and are ignored);
// beyond the largest it runs without a graph (nullopt).
const std::vector<int32_t>& graph_buckets();
std::optional<int32_t> graph_bucket(int32_t batch);

}  // namespace hz::cuda
