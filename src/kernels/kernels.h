// Kernel entry points: raw pointers in, raw pointers out, no model knowledge.
// Each kernel is declared once, in kernel_list.inc; its entry point here dispatches at run time,
// through a per-ISA table (dispatch.cc), to the best implementation for this CPU (AVX2/FMA when
// present, else the scalar reference in ref/). Every SIMD variant has a scalar reference with the
// same signature in namespace hz::kernels::ref, and tests compare the two.
//
// Determinism contract (batch- and chunk-invariance): every output element is computed with a
// reduction order that depends only on the lengths involved, never on how many rows or tokens are
// processed in one call, on the thread count, or on pointer alignment. A sequence's logits are then
// bit-identical whatever it is batched with.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kv_codec.h"
#include "tensor/dtype.h"

namespace hz::kernels {

enum class Isa { kScalar, kAvx2 };
// The implementation in use: the best this CPU supports unless forced (tests, HORIZON_ISA=scalar).
Isa active_isa();
void force_isa(Isa isa);  // forcing an ISA this CPU lacks is a programmer error (checked)
bool isa_supported(Isa isa);
const char* isa_name(Isa isa);
// CPU features relevant to the kernels, e.g. "avx2 fma f16c" (for doctor and bench reports).
const char* cpu_features();

// The dispatched kernels (one row each, with their contracts): see kernel_list.inc.
#define HZ_KERNEL(variants, ret, name, params, args) ret name params;
#include "kernels/kernel_list.inc"
#undef HZ_KERNEL

// ---- matrix multiplication: y = x W^T (matmul and vec_dot are in kernel_list.inc) ----
// Weights: `num_rows` rows of `n` elements of type `wtype`, row r at w + r * w_row_bytes.
// Activations: `num_tokens` rows in the activation type for wtype (see activation_type), row t at
// x + t * x_row_bytes. Output: y[t * y_stride + r] for r in [row_begin, row_end).
// Each y element equals dot(w row, x row) computed exactly as `vec_dot` does.
DType activation_type(DType wtype);  // kF32 for F32/F16/BF16, kQ8_0 for Q8_0/Q4_0, kQ8_K for k-quants
// Converts one f32 activation row to activation_type(wtype) (a copy for kF32).
void quantize_activation_row(DType wtype, const float* x, void* y, int64_t n);
uint64_t activation_row_bytes(DType wtype, int64_t n);
// One f32 row stored as weight type t (f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k; others: nothing
// written): row_bytes(t, n) bytes at dst.
void encode_row(DType t, const float* x, void* dst, int64_t n);

// ---- packed weights (Q4_0, Q8_0): groups of 8 rows, block-interleaved, made once at load ----
// Group g holds rows 8g..8g+7 (rows past the end repeat the last row). Per block b it stores the 8
// rows' f16 scales (16 bytes), then their quants as transposed dwords: dword k of row r at byte
// 16 + 32k + 4r (Q4_0: k < 4, 144 bytes; Q8_0: k < 8, 272 bytes). One vector load then feeds all 8
// rows, and a thread streams one contiguous run instead of 8 short rows.
bool packable(DType wtype);
uint64_t packed_group_bytes(DType wtype, int64_t n);
uint64_t packed_bytes(DType wtype, int64_t rows, int64_t n);
void pack_weights(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t rows, void* out);
// Row r of a packed matrix back in the GGUF layout (the scalar path and tests).
void unpack_row(DType wtype, int64_t n, const void* packed, int64_t r, void* row);
// Packed activations (Q8_0 rows regrouped once per matmul so that a block of a chunk of tokens is
// contiguous): entry (chunk c of kPackedTokenChunk tokens, block b, token j of the chunk) at
// ((c * n/32 + b) * kPackedTokenChunk + j) * 40 = {f32 d, int32 -8 * sum(qs), int8 qs[32]}. The sum is
// stored negated because the Q4_0 dot starts from it: one broadcast from memory per token, no
// negation on a vector port.
constexpr int kPackedTokenChunk = 32;
constexpr int kPackedActivationEntryBytes = 40;
uint64_t packed_activation_bytes(int64_t n, int64_t num_tokens);
void pack_activations(int64_t n, const BlockQ8_0* x, uint64_t x_row_bytes, int64_t num_tokens, void* out);
// Block t of packed activations back as a Q8_0 row (the scalar path and tests).
void unpack_activation_row(int64_t n, const void* packed, int64_t t, BlockQ8_0* row);

}  // namespace hz::kernels
