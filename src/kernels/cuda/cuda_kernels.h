// The CUDA kernels (sm_90a), as host launchers that enqueue on a stream and return a Status.
// Every pointer argument is device memory. Each kernel has a CPU scalar reference (named per
// function) that tests/cuda compares it with; kernels marked "bit-exact" copy their reference
// operation for operation (__fmul_rn/__fadd_rn where the reference has no FMA, its rounding).
// Arguments are checked on the host first (errors name the kernel and argument); without CUDA
// every launcher then returns the device layer's error.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "device/device.h"
#include "kernels/cuda/launch.h"
#include "kernels/kv_codec.h"
#include "tensor/dtype.h"

namespace hz::cuda {

using device::Stream;

// Activations for the Q8_0/Q4_0 matmuls: x[rows][n] f32 -> y[rows][n / 32] Q8_0 blocks.
// Bit-exact with kernels::ref::quantize_row_q8_0 (n a multiple of 32).
Status quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n, const Stream& s);

// y[t][r] = w_r . x_t for rows r < m and tokens t < num_tokens (kernels::ref::matmul). w: m rows of
// row_bytes(wtype, n) bytes. x: f32 [num_tokens][n] for f32/f16/bf16 weights; Q8_0 blocks
// [num_tokens][n / 32] (quantize_q8_0) for q8_0/q4_0 weights. One code path and one reduction order
// for every num_tokens (matrix-vector is num_tokens = 1): a token's result does not depend on the
// batch. Q8_0/Q4_0: each block's integer sum is exact, acc = fma(d_w * d_x, isum, acc) per thread.
// `kernel`: which of matmul.cu's two kernels (default: default_matmul_kernel()).
Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y,
              const Stream& s);
Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y,
              MatmulKernel kernel, const Stream& s);
// The streaming kernel, or the simple one when HORIZON_CUDA_MATMUL=simple (read once).
MatmulKernel default_matmul_kernel();
// The integer block sums of the q8_0/q4_0 matmul, isums[t][r][b] for b < n / 32: the same device
// function the matmul uses, exposed so tests compare it bit for bit with the reference's sums.
Status quant_block_sums(DType wtype, const void* w, int64_t m, int64_t n, const BlockQ8_0* x, int64_t num_tokens,
                        int32_t* isums, const Stream& s);

// y[r] = rms_norm(x[r]) * w for `rows` rows of n (w may be null). kernels::ref::rms_norm (double sum).
Status rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps, const Stream& s);
// Rotates x[num_tokens][num_heads][head_dim] in place: token t at position pos[t], pair i of the
// first rot_dim dims by angle pos * theta[i] (theta[rot_dim / 2]: hz::Rope's per-pair frequencies,
// every scaling folded in), cos/sin scaled by mscale; neox pairs (i, i + rot_dim / 2), else (2i, 2i+1).
// Reference hz::Rope::apply (sin/cos within a few ulp).
Status rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
            int32_t rot_dim, float mscale, bool neox, const Stream& s);
// The KV rotation (kv/kv_rotation.h) of x[num_tokens][num_heads][head_dim] in place: head h's row
// by the signs of KV head h / group (signs[num_heads / group][head_dim]); inverse != 0 undoes it.
// Bit-exact with kernels::ref::hadamard_rows per row.
Status hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs, int32_t group,
                      int32_t inverse, const Stream& s);
// gate[i] = silu(gate[i]) * up[i] (kernels::ref::swiglu; expf within ulps).
Status swiglu(float* gate, const float* up, int64_t n, const Stream& s);
// y[i] += x[i]. Bit-exact with kernels::ref::add.
Status add(float* y, const float* x, int64_t n, const Stream& s);
// y[r][i] += b[i] for `rows` rows of n (biases). Bit-exact with kernels::ref::add per row.
Status add_rows(float* y, const float* b, int64_t rows, int64_t n, const Stream& s);
// y[t][dim] = row tokens[t] of table[vocab][dim] (f32/f16/bf16/q8_0/q4_0) as f32; a token outside
// [0, vocab) gives a NaN row (callers check ids first). Bit-exact with kernels::ref::dequantize_row.
Status embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t num_tokens,
                 float* y, const Stream& s);

// KV codecs, bit-exact with kernels::ref::encode_kv_rows / decode_kv_rows (same layout: rows
// contiguous, fp8 one scale for all `rows`).
Status encode_kv_rows(kernels::KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales,
                      const Stream& s);
Status decode_kv_rows(kernels::KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim,
                      float* y, const Stream& s);

// A step's K/V rows into the arena (launch.h's KvWriteArgs): f32, f16, bf16, fp8, int8 and int4 blocks.
Status kv_write(const KvWriteArgs& a, const Stream& s);

// Paged causal attention (launch.h's PagedAttnArgs): the upload's sizes and the shape are checked
// first. Compared with a double-precision reference built from kernels::ref::decode_kv_rows.
// `kernel`: which of the two kernels (default: default_attention_kernel()); the same values either way.
Status paged_attention(const PagedAttnArgs& a, const Stream& s);
Status paged_attention(const PagedAttnArgs& a, AttentionKernel kernel, const Stream& s);
// The chunked kernel, or the simple one when HORIZON_CUDA_ATTENTION=simple (read once).
AttentionKernel default_attention_kernel();

}  // namespace hz::cuda
