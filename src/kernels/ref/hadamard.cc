// Scalar reference of the randomized Walsh-Hadamard rotation (kernels/hadamard.h).
#include "kernels/hadamard.h"

#include <cmath>

#include "kernels/ref/ref_kernels.h"

namespace hz::kernels {

float hadamard_scale(int64_t len) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(len))); }

namespace ref {
namespace {

// In-place unnormalised Walsh-Hadamard transform of y[len], len a power of two: butterflies of
// stride 1, 2, 4, ..., each (a, b) -> (a + b, a - b).
void wht(float* y, int64_t len) {
  for (int64_t h = 1; h < len; h *= 2) {
    for (int64_t i = 0; i < len; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const float a = y[j], b = y[j + h];
        y[j] = a + b;
        y[j + h] = a - b;
      }
    }
  }
}

}  // namespace

void hadamard_rows(float* x, int64_t rows, int64_t n, const float* signs, int32_t inverse) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * n;
    if (inverse == 0) {
      for (int64_t i = 0; i < n; ++i) xr[i] *= signs[i];
    }
    for (int64_t b = 0; b < n;) {
      const int64_t len = hadamard_block(n, b);
      wht(xr + b, len);
      const float s = hadamard_scale(len);
      for (int64_t i = 0; i < len; ++i) xr[b + i] *= s;
      b += len;
    }
    if (inverse != 0) {
      for (int64_t i = 0; i < n; ++i) xr[i] *= signs[i];
    }
  }
}

}  // namespace ref
}  // namespace hz::kernels
