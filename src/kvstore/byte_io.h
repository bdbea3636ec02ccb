// Little-endian fixed-width fields at byte offsets of a record or index buffer (the formats are
// defined little-endian and this code runs on x86-64 only, so a memcpy is the conversion).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hz::kvstore {

template <typename T>
void put(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}

template <typename T>
T get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

}  // namespace hz::kvstore
