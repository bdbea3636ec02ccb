// Software prefetches that the compiler keeps. GCC treats __builtin_prefetch as free of side
// effects, so a function that does nothing but prefetch is "const" and a call to it is deleted as
// dead code: the attention's next-tile prefetch (a loop over the tile's lines in a helper) was
// compiled away that way, and decode at depth 4096 ran as if there were none.
#pragma once

#include <cstdint>

namespace hz {

// Requests the cache line holding p into every cache level (prefetcht0 on x86-64).
inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  __asm__ __volatile__("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Every line that [p, p + bytes) touches (p need not be line-aligned).
inline void prefetch_range(const void* p, uint64_t bytes) {
  if (bytes == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t last = (a + bytes - 1) & ~uintptr_t{63};
  for (uintptr_t l = a & ~uintptr_t{63}; l <= last; l += 64) prefetch_line(reinterpret_cast<const char*>(l));
}

}  // namespace hz
