// The KV codecs' ISA-independent helpers (the kernels dispatch in dispatch.cc).
#include "kernels/kv_codec.h"

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

}  // namespace hz::kernels
