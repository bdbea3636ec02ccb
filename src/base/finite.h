// Finding NaN and infinities in float arrays: what the engine checks logits (and, on request,
// activations) with before it trusts them.
#pragma once

#include <cstdint>
#include <cstring>

namespace hz {

// Whether every value of x[0, n) is finite (no NaN, no infinity). One pass of integer compares
// on the exponent bits, which the compiler vectorizes (the float compare would be reordered only
// under fast-math).
inline bool all_finite(const float* x, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    bad |= static_cast<uint32_t>((b & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

}  // namespace hz
