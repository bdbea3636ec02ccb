// The KV codecs' ISA-independent helpers (the kernels dispatch in dispatch.cc).
#include "kernels/kv_codec.h"

#include <cmath>

namespace hz::kernels {

int64_t kv_row_elem_bytes(KvCodec c, int64_t head_dim) {
  switch (c) {
    case KvCodec::kF32: return 4 * head_dim;
    case KvCodec::kF16: case KvCodec::kBF16: return 2 * head_dim;
    case KvCodec::kFp8: case KvCodec::kInt8: case KvCodec::kInt8c: return head_dim;
    case KvCodec::kInt4: case KvCodec::kInt4c: return (head_dim + 1) / 2;
    case KvCodec::kInt3: return (3 * head_dim + 7) / 8;
    case KvCodec::kInt2: return (head_dim + 3) / 4;
  }
  return 0;
}

int64_t kv_row_scale_bytes(KvCodec c, int64_t head_dim) {
  return kv_grouped(c) ? 2 * kv_groups(head_dim) : 0;
}

int64_t kv_head_scale_bytes(KvCodec c, int64_t head_dim) {
  if (c == KvCodec::kFp8) return 4;
  return kv_channel_scaled(c) ? 2 * head_dim : 0;
}

const float* kv_byte_scale_table() {
  static const float* table = [] {
    static float t[256];
    for (int b = 0; b < 256; ++b) {  // bytes 128-255 are never written; they read as 0
      t[b] = b == 0 || b > 127 ? 0.0f : std::exp2(static_cast<float>(b - 64) / 4.0f);
    }
    return t;
  }();
  return table;
}

}  // namespace hz::kernels
