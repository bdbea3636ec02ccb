// One KV block as device attention reads it: a plain struct shared by host code and .cu files.
#pragma once

#include <cstdint>

namespace hz::device {

// Byte offsets into the device arena for layer 0 (layer l adds the launch's layer_offset).
// Within a plane: elements [num_kv_heads][block_tokens][head_dim] in `codec`; int8/int4 scales
// [num_kv_heads][block_tokens][groups] f16; fp8 scales [num_kv_heads][block_tokens] f32 (one per
// row: the device encodes each row as it is written).
struct DeviceKvBlock {
  uint64_t k_elems = 0;
  uint64_t v_elems = 0;
  uint64_t k_scales = 0;  // unused for f32/f16/bf16
  uint64_t v_scales = 0;
  uint32_t codec = 0;     // kernels::KvCodec
  uint32_t reserved = 0;
};
static_assert(sizeof(DeviceKvBlock) == 40);

}  // namespace hz::device
