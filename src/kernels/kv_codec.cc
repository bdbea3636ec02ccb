// Dispatch of the KV codecs and their ISA-independent helpers.
#include "kernels/kv_codec.h"

#include "kernels/kernels.h"

namespace hz::kernels {

int64_t kv_row_elem_bytes(KvCodec c, int64_t head_dim) {
  switch (c) {
    case KvCodec::kF32: return 4 * head_dim;
    case KvCodec::kF16: case KvCodec::kBF16: return 2 * head_dim;
    case KvCodec::kFp8: case KvCodec::kInt8: return head_dim;
    case KvCodec::kInt4: return (head_dim + 1) / 2;
  }
  return 0;
}

int64_t kv_row_scale_bytes(KvCodec c, int64_t head_dim) {
  return c == KvCodec::kInt8 || c == KvCodec::kInt4 ? 2 * kv_groups(head_dim) : 0;
}

void encode_kv_rows(KvCodec c, const float* x, int64_t rows, int64_t head_dim, uint8_t* elems, uint8_t* scales) {
  if (active_isa() == Isa::kAvx2) return avx2::encode_kv_rows(c, x, rows, head_dim, elems, scales);
  ref::encode_kv_rows(c, x, rows, head_dim, elems, scales);
}

void decode_kv_rows(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t head_dim, float* y) {
  if (active_isa() == Isa::kAvx2) return avx2::decode_kv_rows(c, elems, scales, rows, head_dim, y);
  ref::decode_kv_rows(c, elems, scales, rows, head_dim, y);
}

}  // namespace hz::kernels
