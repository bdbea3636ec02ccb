// Scalar row kernels: norms, activations, softmax and the small dots/axpys of attention.
#include <cmath>
#include <limits>

#include "kernels/ref/f16_table.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::ref {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum_sq = 0.0;  // double: this is the oracle the SIMD version is measured against
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum_sq / static_cast<double>(n));
  const float s = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w ? (x[i] * s) * w[i] : x[i] * s;
}

void swiglu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void scale(float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  if (max == -std::numeric_limits<float>::infinity()) {
    // Everything masked: no probability mass anywhere (rather than NaN from -inf - -inf).
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) {
  const float* table = f16_table();
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * table[b[i]];
  return sum;
}

void axpy_f16(float* y, float a, const uint16_t* x, int64_t n) {
  const float* table = f16_table();
  for (int64_t i = 0; i < n; ++i) y[i] += a * table[x[i]];
}

}  // namespace hz::kernels::ref
