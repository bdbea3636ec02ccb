// A 65536-entry f16 -> f32 table for the scalar kernels' hot loops, filled from hz::f16_to_f32 so
// a lookup is bit-identical to the conversion (which branches on subnormals, Inf and NaN).
#pragma once

#include <cstdint>

namespace hz::kernels::ref {

// Built on first use (thread-safe); 256 KiB.
const float* f16_table();

}  // namespace hz::kernels::ref
