// Fused attention kernels over KV rows in any cache codec: q.k scores and p.V accumulation for a
// group of query heads that share one KV head (GQA), dequantizing in registers (no f32 copy of the
// rows), plus the tile softmax exponentials. Scalar reference in ref/attn_kernels.cc, AVX2 in
// avx2/attn_kernels.cc; tests compare the two on random data and edge cases.
#pragma once

#include <cstdint>

#include "kernels/kv_codec.h"

namespace hz::kernels {

// Rows: `rows` KV rows of `head_dim` values in codec `c`, row r's elements at
// elems + r * kv_row_elem_bytes(c, head_dim). `scales`: int8/int4 one f16 per group per row
// ([rows][kv_groups]); fp8 the f32 scale of the whole head; unused (may be null) for f32/f16/bf16.
//
// scores[h * rows + r] = q_h . row_r for the `num_heads` queries q[h * head_dim ...]. The group scale
// is factored out of each group's partial dot product (int8/int4: sum_g d_g * (q_g . n_g); fp8:
// scale * (q . e)). Each head's result is computed alone: it does not depend on num_heads.
void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t head_dim, float* scores);
// acc[h * head_dim + i] += sum over r in order of p[h * rows + r] * row_r[i] (int8/int4: the
// coefficient is p * d_g, fp8: p * scale, applied to the raw codes).
void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t head_dim, float* acc);
// x[i] = exp(x[i] - shift) for i < n; returns their sum (a fixed order that depends on n only).
float exp_shift_sum(float* x, int64_t n, float shift);

namespace ref {
void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t head_dim, float* scores);
void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t head_dim, float* acc);
float exp_shift_sum(float* x, int64_t n, float shift);
}  // namespace ref
namespace avx2 {
void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t head_dim, float* scores);
void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t head_dim, float* acc);
float exp_shift_sum(float* x, int64_t n, float shift);
}  // namespace avx2

}  // namespace hz::kernels
