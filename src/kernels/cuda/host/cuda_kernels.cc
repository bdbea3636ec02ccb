// The Status API of the CUDA kernels: host-side argument checks (launch_checks.h), then the raw
// launcher (a .cu file, or stub/raw_stub.cc without CUDA), its error as a Status naming the kernel.
// In src/kernels/cuda/host/ so the kernels module's *.cc glob leaves it to hz_cuda_kernels.
#include "kernels/cuda/cuda_kernels.h"

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/attention_lanes.h"
#include "kernels/cuda/launch_checks.h"

namespace hz::cuda {
namespace {

// Without CUDA the device layer's error (no CUDA in this build); else the launch's error.
Status launched(int err, const char* kernel) {
  if (!device::compiled()) return device::require_gpu(kernel);
  return device::cuda_status(err, kernel);
}

}  // namespace

Status quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA quantize_q8_0", rows, n, kQK8_0));
  return launched(raw::quantize_q8_0(x, y, rows, n, s.handle()), "CUDA quantize_q8_0");
}

MatmulKernel default_matmul_kernel() {
  static const MatmulKernel k = [] {
    const char* v = std::getenv("HORIZON_CUDA_MATMUL");
    return v != nullptr && std::strcmp(v, "simple") == 0 ? MatmulKernel::kSimple : MatmulKernel::kStreaming;
  }();
  return k;
}

Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y,
              MatmulKernel kernel, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_matmul_args(wtype, m, n, num_tokens));
  return launched(raw::matmul(wtype, w, m, n, x, num_tokens, y, kernel, s.handle()), "CUDA matmul");
}

Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y, const Stream& s) {
  return matmul(wtype, w, m, n, x, num_tokens, y, default_matmul_kernel(), s);
}

Status quant_block_sums(DType wtype, const void* w, int64_t m, int64_t n, const BlockQ8_0* x, int64_t num_tokens,
                        int32_t* isums, const Stream& s) {
  if (wtype != DType::kQ8_0 && wtype != DType::kQ4_0)
    return invalid_argument("CUDA quant_block_sums: weight type {} is not q8_0 or q4_0", dtype_name(wtype));
  HZ_RETURN_IF_ERROR(check_matmul_args(wtype, m, n, num_tokens));
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA quant_block_sums", num_tokens * m, n, kQK8_0));
  return launched(raw::quant_block_sums(wtype, w, m, n, x, num_tokens, isums, s.handle()), "CUDA quant_block_sums");
}

Status rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA rms_norm", rows, n));
  return launched(raw::rms_norm(x, w, y, rows, n, eps, s.handle()), "CUDA rms_norm");
}

Status rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
            int32_t rot_dim, float mscale, bool neox, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_rope_args(num_tokens, num_heads, head_dim, rot_dim));
  return launched(raw::rope(x, num_tokens, num_heads, head_dim, pos, theta, rot_dim, mscale, neox, s.handle()), "CUDA rope");
}

Status hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs, int32_t group,
                      int32_t inverse, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_hadamard_args(num_tokens, num_heads, head_dim, group));
  return launched(raw::hadamard_heads(x, num_tokens, num_heads, head_dim, signs, group, inverse, s.handle()),
                  "CUDA hadamard_heads");
}

Status swiglu(float* gate, const float* up, int64_t n, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA swiglu", 1, n));
  return launched(raw::swiglu(gate, up, n, s.handle()), "CUDA swiglu");
}

Status add(float* y, const float* x, int64_t n, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA add", 1, n));
  return launched(raw::add(y, x, n, s.handle()), "CUDA add");
}

Status add_rows(float* y, const float* b, int64_t rows, int64_t n, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_rows_args("CUDA add_rows", rows, n));
  return launched(raw::add_rows(y, b, rows, n, s.handle()), "CUDA add_rows");
}

Status embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t num_tokens,
                 float* y, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_embedding_args(type, vocab, dim, num_tokens));
  return launched(raw::embedding(type, table, vocab, dim, tokens, num_tokens, y, s.handle()), "CUDA embedding");
}

Status encode_kv_rows(kernels::KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales,
                      const Stream& s) {
  HZ_RETURN_IF_ERROR(check_kv_codec_args(c, rows, head_dim));
  return launched(raw::encode_kv_rows(c, x, rows, head_dim, elems, scales, s.handle()), "CUDA encode_kv_rows");
}

Status decode_kv_rows(kernels::KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim,
                      float* y, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_kv_codec_args(c, rows, head_dim));
  return launched(raw::decode_kv_rows(c, elems, scales, rows, head_dim, y, s.handle()), "CUDA decode_kv_rows");
}

Status kv_write(const KvWriteArgs& a, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_kv_write_args(a));
  return launched(raw::kv_write(a, s.handle()), "CUDA kv_write");
}

Status paged_attention(const PagedAttnArgs& a, const Stream& s) { return paged_attention(a, default_attention_kernel(), s); }

Status paged_attention(const PagedAttnArgs& a, AttentionKernel kernel, const Stream& s) {
  HZ_RETURN_IF_ERROR(check_attention_shape(a.num_heads, a.num_kv_heads, a.head_dim, a.block_tokens));
  const int32_t group = a.num_heads / a.num_kv_heads;
  HZ_RETURN_IF_ERROR(check_paged_attention_args(a.num_qblocks, a.qblock_size, a.max_segments, a.num_queries, group));
  if (a.num_kv_heads > 65535) return invalid_argument("CUDA attention: {} KV heads is more than 65535", a.num_kv_heads);
  const int64_t rows = static_cast<int64_t>(a.qblock_size) * group;
  const int64_t smem = kernel == AttentionKernel::kChunked ? attn::smem_bytes(rows, a.head_dim)
                                                           : attention_smem_bytes(a.qblock_size * group, a.head_dim);
  return launched(raw::paged_attention(a, smem, kernel, s.handle()), "CUDA paged_attention");
}

AttentionKernel default_attention_kernel() {
  static const AttentionKernel k = [] {
    const char* v = std::getenv("HORIZON_CUDA_ATTENTION");
    return v != nullptr && std::strcmp(v, "simple") == 0 ? AttentionKernel::kSimple : AttentionKernel::kChunked;
  }();
  return k;
}

}  // namespace hz::cuda
