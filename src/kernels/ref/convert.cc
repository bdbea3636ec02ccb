// Scalar f16/bf16 row conversions (IEEE round-to-nearest-even, see tensor/dtype.h).
#include <vector>

#include "kernels/ref/f16_table.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::ref {

const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
  const float* table = f16_table();
  for (int64_t i = 0; i < n; ++i) y[i] = table[x[i]];
}

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

}  // namespace hz::kernels::ref
