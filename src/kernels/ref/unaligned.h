// Unaligned loads and stores of the scalar reference kernels (KV rows and scales sit at any byte
// offset inside a plane).
#pragma once

#include <cstdint>
#include <cstring>

namespace hz::kernels::ref {

inline float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace hz::kernels::ref
