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

// Codecs with a scale per group of a head row: int8, int4 (f16 scales) and int3, int2 (one-byte scales).
inline bool kv_grouped(KvCodec c) {
  return c == KvCodec::kInt8 || c == KvCodec::kInt4 || c == KvCodec::kInt3 || c == KvCodec::kInt2;
}
// int3 and int2 store each group's scale in one byte (kv_byte_scale).
inline bool kv_byte_scaled(KvCodec c) { return c == KvCodec::kInt3 || c == KvCodec::kInt2; }
// Elements per scale group in a head row: min(32, head_dim); a row's last group may be shorter.
inline int64_t kv_group(int64_t head_dim) { return head_dim < 32 ? head_dim : 32; }
inline int64_t kv_groups(int64_t head_dim) { return (head_dim + kv_group(head_dim) - 1) / kv_group(head_dim); }
// Bytes of one head row's elements (scales excluded).
int64_t kv_row_elem_bytes(KvCodec c, int64_t head_dim);
// Bytes of one head row's scales (int8/int4: groups f16 values; int3/int2: groups bytes; others 0;
// fp8 keeps its scale per head of a block).
int64_t kv_row_scale_bytes(KvCodec c, int64_t head_dim);

// int3 / int2 (the cold-only types): value = q * d with a signed code q in [-4, 3] / [-2, 1], like
// Q4_0 one level more on the side of the group's largest magnitude. Codes are packed LSB first in
// a bit stream per head row (element e at bits [b*e, b*e + b), rows padded to whole bytes): int2
// four per byte, int3 eight per three bytes. The group scale d is one byte: bit 7 its sign, bits
// 0-6 a code c, |d| = 2^((c - 64) / 4) (quarter octaves from 2^-15.75 to 2^15.75), c = 0: d = 0.
// The encoder picks, among the codes near max|x| / levels, the one of least squared error.
// The 256 scale values, indexed by the scale byte.
const float* kv_byte_scale_table();
inline float kv_byte_scale(uint8_t code) { return kv_byte_scale_table()[code]; }
// Code of element `i` of an int3 / int2 row (signed, before the scale).
inline int kv_int3_code(const uint8_t* row, int64_t i) {
  const int64_t bit = 3 * i, byte = bit >> 3, sh = bit & 7;
  int v = row[byte] >> sh;
  if (sh > 5) v |= row[byte + 1] << (8 - sh);  // the code straddles two bytes
  return (v & 7) - 4;
}
inline int kv_int2_code(const uint8_t* row, int64_t i) { return ((row[i >> 2] >> ((i & 3) * 2)) & 3) - 2; }

// The codec kernels (encode_kv_rows, decode_kv_rows) are declared in kernel_list.inc (kernels.h).

// E4M3 (OCP FP8, bias 7, no infinities, max 448) scalar conversions.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t v);

}  // namespace hz::kernels
