// Randomized Walsh-Hadamard rotation of KV head rows (the kernel hadamard_rows is declared in
// kernel_list.inc: scalar reference in ref/hadamard.cc, AVX2 in avx2/hadamard.cc). An orthogonal
// rotation of K (and, identically, of the query) leaves every score q.k unchanged while spreading a
// few large channels over the whole row, so per-group scales of quantized KV fit the values better.
//
// Head dims that are not powers of two are rotated block by block over the binary decomposition of
// the head dim (80 = 64 + 16, 96 = 64 + 32): still orthogonal, but a large channel is spread only
// within its block.
#pragma once

#include <cstdint>

namespace hz::kernels {

// Length of the first Hadamard block of a row of `n` values from `begin`: the largest power of two
// that fits in n - begin.
inline int64_t hadamard_block(int64_t n, int64_t begin) {
  int64_t len = 1;
  while (len * 2 <= n - begin) len *= 2;
  return len;
}

// The normalisation of a Hadamard block of `len` values, computed the same way by every variant.
float hadamard_scale(int64_t len);

}  // namespace hz::kernels
