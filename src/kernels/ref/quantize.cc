// Scalar quantizers (Q8_0, Q4_0, Q8_K) and dequantize_row, bit-compatible with llama.cpp's
// reference quantizers: scales computed in f32, stored as f16 (f32 for Q8_K).
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::ref {

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  HZ_CHECK(n % kQK8_0 == 0);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) {
      const float a = std::fabs(xb[j]);
      amax = amax > a ? amax : a;  // llama.cpp's MAX (a NaN input makes d NaN, as there)
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    // roundf rounds half away from zero, as llama.cpp's reference quantizer does.
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  HZ_CHECK(n % kQK4_0 == 0);
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* xb = x + b * kQK4_0;
    float amax = 0.0f, max = 0.0f;  // first element of largest magnitude, with its sign
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      // x * id lies in [-8, 8]; +8.5 then truncation rounds half up; 16 clamps to 15.
      const int q0 = static_cast<int8_t>(xb[j] * id + 8.5f);
      const int q1 = static_cast<int8_t>(xb[j + kQK4_0 / 2] * id + 8.5f);
      y[b].qs[j] = static_cast<uint8_t>((q0 < 15 ? q0 : 15) | ((q1 < 15 ? q1 : 15) << 4));
    }
  }
}

namespace {
// Round half to even for |v| < 2^22 (llama.cpp's nearest_int, used by the k-quant quantizers).
inline int nearest_int(float v) {
  const float biased = v + 12582912.0f;  // 1.5 * 2^23: the fraction bits then hold the rounded value
  int32_t i;
  std::memcpy(&i, &biased, 4);
  return (i & 0x007fffff) - 0x00400000;
}
}  // namespace

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  HZ_CHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = nearest_int(iscale * xb[j]);
      y[b].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[b].qs[g * 16 + j];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

void dequantize_row(DType type, const void* x, float* y, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(y, x, n * sizeof(float));
      return;
    case DType::kF16:
      f16_to_f32_row(static_cast<const uint16_t*>(x), y, n);
      return;
    case DType::kBF16:
      bf16_to_f32_row(static_cast<const uint16_t*>(x), y, n);
      return;
    case DType::kQ8_0: {
      HZ_CHECK(n % kQK8_0 == 0);
      const auto* b = static_cast<const BlockQ8_0*>(x);
      for (int64_t i = 0; i < n / kQK8_0; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = b[i].qs[j] * d;
      }
      return;
    }
    case DType::kQ4_0: {
      HZ_CHECK(n % kQK4_0 == 0);
      const auto* b = static_cast<const BlockQ4_0*>(x);
      for (int64_t i = 0; i < n / kQK4_0; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
          y[i * kQK4_0 + j] = ((b[i].qs[j] & 0x0f) - 8) * d;
          y[i * kQK4_0 + j + kQK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case DType::kQ4_K:
      dequantize_row_q4_k(static_cast<const BlockQ4_K*>(x), y, n);
      return;
    case DType::kQ5_K:
      dequantize_row_q5_k(static_cast<const BlockQ5_K*>(x), y, n);
      return;
    case DType::kQ6_K:
      dequantize_row_q6_k(static_cast<const BlockQ6_K*>(x), y, n);
      return;
    case DType::kQ8_K: {
      HZ_CHECK(n % kQK_K == 0);
      const auto* b = static_cast<const BlockQ8_K*>(x);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        for (int j = 0; j < kQK_K; ++j) y[i * kQK_K + j] = b[i].qs[j] * b[i].d;
      }
      return;
    }
    default:
      HZ_CHECK_MSG(false, "dequantize_row: unsupported dtype");
  }
}

}  // namespace hz::kernels::ref
