// KvType: the element types a KV cache can store, and their names. The layouts they imply live in
// kv/kv_layout.h, their codecs in kernels/kv_codec.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace hz {

// Element types of the KV cache, from widest to most compact. The one enum for them: kernels name
// it KvCodec (kernels/kv_codec.h), the planner and the KV cache KvType.
// int8c / int4c: 8 / 4 bits with a scale and an offset per channel of a head over a block's rows,
// like int3 and int2 (kernels/kv_codec.h), where int8 / int4 scale each row's groups. int3 and int2 are cold-only:
// usable under a hot window of a wider type (kv_type_cold_only). Values are not persisted (names
// are), so a new type goes at the end.
enum class KvType : uint8_t { kF32, kF16, kBF16, kFp8, kInt8, kInt4, kInt3, kInt2, kInt4c, kInt8c };
inline constexpr size_t kNumKvTypes = 10;

const char* kv_type_name(KvType t);                       // "f32", "f16", ..., "int8", "int8c", "int4", "int4c", "int3", "int2"
std::optional<KvType> kv_type_from_name(std::string_view name);  // case-insensitive; "fp8_e4m3" = fp8
const std::vector<KvType>& all_kv_types();                // from widest to most compact
// Bits per element without scales (32, 16, 16, 8, 8, 8, 4, 4, 3, 2): orders types by compactness.
int kv_type_element_bits(KvType t);
// Types too lossy to hold every position (int3, int2): only the cold type under a hot window,
// where the newest tokens (and sink tokens) stay in the wider hot type.
inline bool kv_type_cold_only(KvType t) { return t == KvType::kInt3 || t == KvType::kInt2; }

}  // namespace hz
