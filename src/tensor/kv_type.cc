#include "tensor/kv_type.h"

#include <cctype>
#include <string>

namespace hz {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kBF16: return "bf16";
    case KvType::kFp8: return "fp8";
    case KvType::kInt8: return "int8";
    case KvType::kInt4: return "int4";
    case KvType::kInt4c: return "int4c";
    case KvType::kInt8c: return "int8c";
    case KvType::kInt3: return "int3";
    case KvType::kInt2: return "int2";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "fp8_e4m3" || n == "e4m3") return KvType::kFp8;
  for (KvType t : all_kv_types()) {
    if (n == kv_type_name(t)) return t;
  }
  return std::nullopt;
}

const std::vector<KvType>& all_kv_types() {
  static const std::vector<KvType> kAll = {KvType::kF32, KvType::kF16, KvType::kBF16,
                                           KvType::kFp8, KvType::kInt8, KvType::kInt8c, KvType::kInt4,
                                           KvType::kInt4c, KvType::kInt3, KvType::kInt2};
  return kAll;
}

int kv_type_element_bits(KvType t) {
  switch (t) {
    case KvType::kF32: return 32;
    case KvType::kF16: case KvType::kBF16: return 16;
    case KvType::kFp8: case KvType::kInt8: case KvType::kInt8c: return 8;
    case KvType::kInt4: case KvType::kInt4c: return 4;
    case KvType::kInt3: return 3;
    case KvType::kInt2: return 2;
  }
  return 0;
}

}  // namespace hz
