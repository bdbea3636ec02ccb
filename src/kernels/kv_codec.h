// KV-cache element codecs: encode head rows of a KV block into a compact type and decode a tile of
// them back to f32 inside attention. Scalar reference in ref/kv_codec.cc, AVX2 in avx2/kv_codec.cc;
// decoding is bit-identical between the two (tests compare them). Layouts match kv/kv_layout.h.
#pragma once

#include <cstdint>

#include "tensor/kv_type.h"

namespace hz::kernels {

// The KV element type (tensor/kv_type.h), named for what kernels do with it.
using KvCodec = ::hz::KvType;

// Elements per int8/int4 scale group in a head row: min(32, head_dim); a row's last group may be shorter.
inline int64_t kv_group(int64_t head_dim) { return head_dim < 32 ? head_dim : 32; }
inline int64_t kv_groups(int64_t head_dim) { return (head_dim + kv_group(head_dim) - 1) / kv_group(head_dim); }
// Bytes of one head row's elements (scales excluded).
int64_t kv_row_elem_bytes(KvCodec c, int64_t head_dim);
// Bytes of one head row's scales (int8/int4: groups f16 values; others 0; fp8 keeps its scale per head of a block).
int64_t kv_row_scale_bytes(KvCodec c, int64_t head_dim);

// Encodes `rows` head rows x[rows][head_dim]: elements to `elems` (row stride kv_row_elem_bytes),
// scales to `scales`: int8/int4 one f16 per group per row ([rows][groups]); fp8 one f32 for all the
// rows (the caller passes a whole head of a block: scale = max|x| / 448, E4M3 round-to-nearest-even,
// saturating); others none. Deterministic: the same input always gives the same bytes.
void encode_kv_rows(KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales);
// Decodes `rows` head rows to y[rows][head_dim]. `scales` as written by encode_kv_rows, pointing at
// the first row's scales (fp8: the head's f32 scale).
void decode_kv_rows(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim, float* y);

// E4M3 (OCP FP8, bias 7, no infinities, max 448) scalar conversions.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t v);

namespace ref {
void encode_kv_rows(KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales);
void decode_kv_rows(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim, float* y);
}  // namespace ref
namespace avx2 {
void encode_kv_rows(KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales);
void decode_kv_rows(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim, float* y);
}  // namespace avx2

}  // namespace hz::kernels
