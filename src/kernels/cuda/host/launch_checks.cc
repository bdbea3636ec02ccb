#include "kernels/cuda/launch_checks.h"

#include <algorithm>
#include <climits>

namespace hz::cuda {

bool weight_type_supported(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 || t == DType::kQ4_0;
}

bool kv_codec_supported(kernels::KvCodec c) {
  using kernels::KvCodec;
  return c == KvCodec::kF32 || c == KvCodec::kF16 || c == KvCodec::kBF16 || c == KvCodec::kFp8 || c == KvCodec::kInt8 ||
         c == KvCodec::kInt4;
}

Status check_rows_args(const char* kernel, int64_t rows, int64_t n, int64_t multiple) {
  if (rows <= 0) return invalid_argument("{}: rows = {} must be > 0", kernel, rows);
  if (n <= 0) return invalid_argument("{}: n = {} must be > 0", kernel, n);
  if (multiple > 1 && n % multiple != 0) return invalid_argument("{}: n = {} must be a multiple of {}", kernel, n, multiple);
  if (rows > INT64_MAX / n || rows * n / 256 >= INT32_MAX)
    return invalid_argument("{}: {} x {} elements is more than one launch handles", kernel, rows, n);
  return Status();
}

Status check_rope_args(int64_t num_tokens, int32_t num_heads, int32_t head_dim, int32_t rot_dim) {
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA rope", num_tokens * std::max(num_heads, 1), std::max(head_dim, 1)));
  if (num_heads <= 0) return invalid_argument("CUDA rope: num_heads = {} must be > 0", num_heads);
  if (rot_dim < 2 || rot_dim > head_dim || rot_dim % 2 != 0)
    return invalid_argument("CUDA rope: rot_dim = {} must be even and within 2..head_dim ({})", rot_dim, head_dim);
  return Status();
}

Status check_hadamard_args(int64_t num_tokens, int32_t num_heads, int32_t head_dim, int32_t group) {
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA hadamard_heads", num_tokens * std::max(num_heads, 1), std::max(head_dim, 1)));
  if (num_heads <= 0 || group <= 0 || num_heads % group != 0)
    return invalid_argument("CUDA hadamard_heads: num_heads = {} must be a positive multiple of group = {}", num_heads, group);
  if (head_dim < 1 || head_dim > 256) return invalid_argument("CUDA hadamard_heads: head_dim = {} must be within 1..256", head_dim);
  return Status();
}

Status check_embedding_args(DType type, int64_t vocab, int64_t dim, int64_t num_tokens) {
  if (!weight_type_supported(type))
    return unimplemented("CUDA embedding: table type {} is not supported (f32, f16, bf16, q8_0, q4_0)", dtype_name(type));
  if (vocab <= 0) return invalid_argument("CUDA embedding: vocab = {} must be > 0", vocab);
  if (num_tokens <= 0 || num_tokens > INT32_MAX) return invalid_argument("CUDA embedding: num_tokens = {} must be within 1..2^31-1", num_tokens);
  return check_rows_args("CUDA embedding", num_tokens, dim, type == DType::kQ8_0 || type == DType::kQ4_0 ? kQK8_0 : 1);
}

Status check_kv_codec_args(kernels::KvCodec c, int64_t rows, int64_t head_dim) {
  if (!kv_codec_supported(c)) return unimplemented("CUDA KV codec {} is not supported", static_cast<int>(c));
  return check_rows_args("CUDA KV codec", rows, head_dim);
}

Status check_kv_write_args(const KvWriteArgs& a) {
  using kernels::KvCodec;
  if (!kv_codec_supported(a.codec))
    return unimplemented("CUDA kv_write: KV codec {} is not one of f32, f16, bf16, fp8, int8, int4", static_cast<int>(a.codec));
  if (a.num_tokens <= 0 || a.num_tokens > INT32_MAX)
    return invalid_argument("CUDA kv_write: num_tokens = {} must be within 1..2^31-1", a.num_tokens);
  if (a.num_kv_heads <= 0) return invalid_argument("CUDA kv_write: num_kv_heads = {} must be > 0", a.num_kv_heads);
  if (a.head_dim < 8 || a.head_dim > 256 || a.head_dim % 2 != 0)
    return unimplemented("CUDA kv_write: head_dim {} is not an even number within 8..256", a.head_dim);
  if (a.block_tokens <= 0 || a.block_tokens > 4096)
    return invalid_argument("CUDA kv_write: block_tokens {} is not within 1..4096", a.block_tokens);
  return check_rows_args("CUDA kv_write", a.num_tokens * a.num_kv_heads, a.head_dim);
}

Status check_matmul_args(DType wtype, int64_t m, int64_t n, int64_t num_tokens) {
  if (!weight_type_supported(wtype))
    return unimplemented("CUDA matmul: weight type {} is not supported (f32, f16, bf16, q8_0, q4_0)", dtype_name(wtype));
  if (m <= 0 || m > INT32_MAX) return invalid_argument("CUDA matmul: rows m = {} must be within 1..2^31-1", m);
  if (n <= 0) return invalid_argument("CUDA matmul: columns n = {} must be > 0", n);
  if ((wtype == DType::kQ8_0 || wtype == DType::kQ4_0) && n % kQK8_0 != 0)
    return invalid_argument("CUDA matmul: columns n = {} of a {} matrix must be a multiple of 32", n, dtype_name(wtype));
  if (num_tokens <= 0 || (num_tokens + kMatmulTokenTile - 1) / kMatmulTokenTile > 65535)
    return invalid_argument("CUDA matmul: num_tokens = {} must be within 1..{}", num_tokens, int64_t{65535} * kMatmulTokenTile);
  return Status();
}

Dim3 matmul_grid(int64_t m, int64_t num_tokens) {
  Dim3 g;
  g.x = static_cast<uint32_t>(m);
  g.y = static_cast<uint32_t>((num_tokens + kMatmulTokenTile - 1) / kMatmulTokenTile);
  return g;
}

Status check_attention_shape(int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, int32_t block_tokens) {
  if (num_kv_heads <= 0 || num_heads <= 0 || num_heads % num_kv_heads != 0)
    return invalid_argument("CUDA attention: {} query heads is not a multiple of {} KV heads", num_heads, num_kv_heads);
  if (num_heads / num_kv_heads > kAttnMaxRows)
    return unimplemented("CUDA attention: {} query heads per KV head is more than {}", num_heads / num_kv_heads, kAttnMaxRows);
  if (head_dim < 8 || head_dim > 256 || head_dim % 2 != 0)
    return unimplemented("CUDA attention: head_dim {} is not an even number within 8..256", head_dim);
  if (block_tokens <= 0 || block_tokens > 4096) return invalid_argument("CUDA attention: block_tokens {} is not within 1..4096", block_tokens);
  return Status();
}

Status check_paged_attention_args(int32_t num_qblocks, int32_t qblock_size, int32_t max_segments, int64_t num_queries,
                                  int32_t group) {
  if (num_queries <= 0 || num_queries > INT32_MAX)
    return invalid_argument("CUDA attention: num_queries = {} must be within 1..2^31-1", num_queries);
  if (num_qblocks <= 0 || num_qblocks > num_queries)
    return invalid_argument("CUDA attention: {} query blocks for {} queries", num_qblocks, num_queries);
  if (qblock_size <= 0 || qblock_size > kAttnMaxQueryBlock || int64_t{qblock_size} * group > kAttnMaxRows)
    return invalid_argument("CUDA attention: query block size {} x {} heads per KV head exceeds {} rows", qblock_size, group,
                            kAttnMaxRows);
  if (max_segments <= 0 || max_segments > 65535)
    return invalid_argument("CUDA attention: {} key segments of {} positions is out of range (1..65535)", max_segments,
                            kAttnSegmentTokens);
  return Status();
}

int32_t attention_query_block(int32_t group, bool prefill) {
  if (!prefill || group <= 0) return 1;
  return std::clamp(kAttnMaxRows / group, 1, kAttnMaxQueryBlock);
}

int64_t attention_smem_bytes(int32_t rows, int32_t head_dim) {
  const int64_t hd = head_dim, t = kAttnTileTokens;
  const int64_t groups = kernels::kv_groups(hd);
  int64_t floats = rows * hd       // q rows (scaled)
                   + rows * hd     // accumulators
                   + rows * t      // score / probability tile
                   + 3 * rows      // running max, sum, tile rescale
                   + t * (hd + 1)  // staged K codes as f32, rows hd + 1 apart (banks)
                   + t * hd        // staged V codes as f32
                   + 2 * t * groups;  // their group scales
  return floats * 4;
}

int64_t attention_partial_floats(int64_t num_queries, int32_t num_heads, int32_t max_segments, int32_t head_dim) {
  return num_queries * num_heads * max_segments * (static_cast<int64_t>(head_dim) + 2);
}

const std::vector<int32_t>& graph_buckets() {
  static const std::vector<int32_t> kBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  return kBuckets;
}

std::optional<int32_t> graph_bucket(int32_t batch) {
  if (batch <= 0) return std::nullopt;
  for (int32_t b : graph_buckets()) {
    if (b >= batch) return b;
  }
  return std::nullopt;
}

}  // namespace hz::cuda
