// XXH3-64 compiled with this folder's AVX2 flags: xxhash's header-only build then takes its AVX2
// path (the system library is built for baseline x86-64, SSE2). Same function, same values.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels::avx2 {

uint64_t checksum64(const void* p, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, n, seed); }

}  // namespace hz::kernels::avx2
