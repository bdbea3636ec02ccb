// AVX2 randomized Walsh-Hadamard rotation, bit-identical to the scalar reference (ref/hadamard.cc):
// every butterfly is the same a + b / a - b with the same operands in the same order, strides 1, 2
// and 4 inside a register (a permute brings each partner alongside), wider strides across
// registers. Blocks shorter than 8 values take the scalar loops. NOTE: a contracted multiply-add
// cannot change a bit here: the only product that meets an addition is by a sign (+1 / -1), exact.
#include <immintrin.h>

#include "kernels/avx2/avx2_kernels.h"
#include "kernels/hadamard.h"

namespace hz::kernels::avx2 {
namespace {

void wht_scalar(float* y, int64_t len) {
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

// Strides 1, 2, 4 of 8 values: lanes whose partner is above them keep a + b (v + p), the others
// take a - b with a the partner (p - v).
inline __m256 wht8(__m256 v) {
  __m256 p = _mm256_permute_ps(v, 0xB1);  // [1 0 3 2 5 4 7 6]
  v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xAA);
  p = _mm256_permute_ps(v, 0x4E);  // [2 3 0 1 6 7 4 5]
  v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xCC);
  p = _mm256_permute2f128_ps(v, v, 0x01);  // halves swapped
  return _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xF0);
}

void wht(float* y, int64_t len) {
  if (len < 8) return wht_scalar(y, len);
  for (int64_t i = 0; i < len; i += 8) _mm256_storeu_ps(y + i, wht8(_mm256_loadu_ps(y + i)));
  for (int64_t h = 8; h < len; h *= 2) {
    for (int64_t i = 0; i < len; i += 2 * h) {
      for (int64_t j = i; j < i + h; j += 8) {
        const __m256 a = _mm256_loadu_ps(y + j), b = _mm256_loadu_ps(y + j + h);
        _mm256_storeu_ps(y + j, _mm256_add_ps(a, b));
        _mm256_storeu_ps(y + j + h, _mm256_sub_ps(a, b));
      }
    }
  }
}

void mul_signs(float* x, const float* signs, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(signs + i)));
  for (; i < n; ++i) x[i] *= signs[i];
}

}  // namespace

void hadamard_rows(float* x, int64_t rows, int64_t n, const float* signs, int32_t inverse) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * n;
    if (inverse == 0) mul_signs(xr, signs, n);
    for (int64_t b = 0; b < n;) {
      const int64_t len = hadamard_block(n, b);
      wht(xr + b, len);
      const float s = hadamard_scale(len);
      int64_t i = 0;
      const __m256 vs = _mm256_set1_ps(s);
      for (; i + 8 <= len; i += 8) _mm256_storeu_ps(xr + b + i, _mm256_mul_ps(_mm256_loadu_ps(xr + b + i), vs));
      for (; i < len; ++i) xr[b + i] *= s;
      b += len;
    }
    if (inverse != 0) mul_signs(xr, signs, n);
  }
}

}  // namespace hz::kernels::avx2
