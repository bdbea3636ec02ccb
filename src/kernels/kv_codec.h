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

// Codecs with an f16 scale per group of a head row: int8, int4.
inline bool kv_grouped(KvCodec c) { return c == KvCodec::kInt8 || c == KvCodec::kInt4; }
// Codecs with a one-byte scale per channel of a head in a block (kv_byte_scale): int8c, int4c, int3, int2.
inline bool kv_channel_scaled(KvCodec c) {
  return c == KvCodec::kInt8c || c == KvCodec::kInt4c || c == KvCodec::kInt3 || c == KvCodec::kInt2;
}
// Elements per int8/int4 scale group in a head row: min(32, head_dim); a row's last group may be shorter.
inline int64_t kv_group(int64_t head_dim) { return head_dim < 32 ? head_dim : 32; }
inline int64_t kv_groups(int64_t head_dim) { return (head_dim + kv_group(head_dim) - 1) / kv_group(head_dim); }
// Bytes of one head row's elements (scales excluded).
int64_t kv_row_elem_bytes(KvCodec c, int64_t head_dim);
// Bytes of one head row's scales (int8/int4: groups f16 values; others 0).
int64_t kv_row_scale_bytes(KvCodec c, int64_t head_dim);
// Bytes of the scales of one head of a block, for codecs that scale per head rather than per row:
// fp8 4 (one f32), int8c/int4c/int3/int2 2 * head_dim (a scale and an offset byte per channel); others 0.
int64_t kv_head_scale_bytes(KvCodec c, int64_t head_dim);

// int8c / int4c / int3 / int2 (asymmetric per-channel quantization, as KIVI does for keys; int3
// and int2 are the cold-only types): each channel of a head gets its own scale d and offset m over
// a block's rows (the encoder gets a whole head of a block, as for fp8), so an outlier or offset
// channel costs the others nothing. value = (q + z * u) * d with the unsigned code q in [0, 255] /
// [0, 15] / [0, 7] / [0, 3] and the offset unit u = 4 for int8c (so the offset reaches past its 255
// levels), 1/4 for the others: m = z * u * d. Codes are packed LSB first in a bit stream per head
// row (element e at bits [b*e, b*e + b), rows padded to whole bytes): int8c one per byte, int4c two
// per byte (element 2j in the low nibble of byte j, as int4), int2 four per byte, int3 eight per
// three bytes. Scales of a head: [head_dim] scale
// bytes, then [head_dim] offset bytes z (int8). A scale byte c in [0, 127] means
// d = 2^((c - 64) / 4) (quarter octaves from 2^-15.75 to 2^15.75), c = 0: d = 0. The encoder
// picks, among the scales near (max - min) / levels and the offsets near min, the pair of least
// squared error over the finite values; NaN codes as the level nearest 0, +-Inf as the top / bottom
// level, and neither moves the scale or the offset.
// The 256 scale values, indexed by the scale byte.
const float* kv_byte_scale_table();
inline float kv_byte_scale(uint8_t code) { return kv_byte_scale_table()[code]; }
// Code q of element `i` of an int4c / int3 / int2 row.
inline int kv_int3_code(const uint8_t* row, int64_t i) {
  const int64_t bit = 3 * i, byte = bit >> 3, sh = bit & 7;
  int v = row[byte] >> sh;
  if (sh > 5) v |= row[byte + 1] << (8 - sh);  // the code straddles two bytes
  return v & 7;
}
inline int kv_int2_code(const uint8_t* row, int64_t i) { return (row[i >> 2] >> ((i & 3) * 2)) & 3; }
inline int kv_int4c_code(const uint8_t* row, int64_t i) { return (row[i >> 1] >> ((i & 1) * 4)) & 15; }
// Code q of element `i` of a row of channel-scaled codec c (kv_channel_scaled).
inline int kv_channel_code(KvCodec c, const uint8_t* row, int64_t i) {
  if (c == KvCodec::kInt8c) return row[i];
  return c == KvCodec::kInt4c ? kv_int4c_code(row, i) : c == KvCodec::kInt3 ? kv_int3_code(row, i) : kv_int2_code(row, i);
}
// The offset unit u of codec c's offset byte z (in steps of its scale).
inline float kv_channel_offset_unit(KvCodec c) { return c == KvCodec::kInt8c ? 4.0f : 0.25f; }
// The offset z * u of channel `ch` of a channel-scaled head of codec c whose scales start at `scales`.
inline float kv_channel_offset(KvCodec c, const uint8_t* scales, int64_t head_dim, int64_t ch) {
  return kv_channel_offset_unit(c) * static_cast<float>(static_cast<int8_t>(scales[head_dim + ch]));
}

// The codec kernels (encode_kv_rows, decode_kv_rows) are declared in kernel_list.inc (kernels.h).

// E4M3 (OCP FP8, bias 7, no infinities, max 448) scalar conversions.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t v);

}  // namespace hz::kernels
