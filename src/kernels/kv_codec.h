// KV-cache element codecs: the codec types and their row layouts (match kv/kv_layout.h). The
// kernels that encode head rows of a KV block and decode a tile of them back to f32 inside attention
// are in kernel_list.inc: scalar reference in ref/kv_codec.cc, AVX2 in avx2/kv_codec.cc; decoding is
// bit-identical between the two (tests compare them).
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

// The codec kernels (encode_kv_rows, decode_kv_rows) are declared in kernel_list.inc (kernels.h).

// E4M3 (OCP FP8, bias 7, no infinities, max 448) scalar conversions.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t v);

}  // namespace hz::kernels
