// KvType: the element types a KV cache can store, and their names. The layouts they imply live in
// kv/kv_layout.h, their codecs in kernels/kv_codec.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace hz {

// Element types of the KV cache, from widest to most compact. The one enum for them: kernels name
// it KvCodec (kernels/kv_codec.h), the planner and the KV cache KvType.
enum class KvType : uint8_t { kF32, kF16, kBF16, kFp8, kInt8, kInt4 };

const char* kv_type_name(KvType t);                       // "f32", "f16", "bf16", "fp8", "int8", "int4"
std::optional<KvType> kv_type_from_name(std::string_view name);  // case-insensitive; "fp8_e4m3" = fp8
const std::vector<KvType>& all_kv_types();                // from widest to most compact
// Bits per element without scales (32, 16, 16, 8, 8, 4): orders types by compactness.
int kv_type_element_bits(KvType t);

}  // namespace hz
