// Field reads and writes through byte pointers, for every kernel family: KV rows, block scales and
// packed weights sit at any byte address, so no alignment is assumed (memcpy compiles to one mov).
// Internal linkage (anonymous namespace): files compiled with AVX2 or AVX-512 flags include this
// too, and the linker could otherwise keep their copy for every caller.
#pragma once

#include <cstdint>
#include <cstring>

namespace hz::kernels {
namespace {

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
inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace
}  // namespace hz::kernels
