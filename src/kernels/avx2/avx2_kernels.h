// AVX2/FMA/F16C kernels (only the .cc files in this folder are compiled with those ISA flags).
// A kernel without an AVX2 variant resolves to the scalar reference through the using-directive
// below: qualified lookup of avx2::name finds ref::name only when avx2 declares no `name` itself.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::avx2 {

using namespace ::hz::kernels::ref;  // NOLINT: fallback for kernels not (yet) vectorized

}  // namespace hz::kernels::avx2
