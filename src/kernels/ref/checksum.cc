// XXH3-64 from the system xxhash library: the reference the AVX2 build is checked against.
#include <xxhash.h>

#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::ref {

uint64_t checksum64(const void* p, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, n, seed); }

}  // namespace hz::kernels::ref
