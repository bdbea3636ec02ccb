// Scalar vec_dot and matmul for every supported weight type. Float types accumulate left to right
// in f32; Q8_0/Q4_0 sum each block's integer products exactly, then acc = fma(d_w * d_x, isum, acc)
// in block order: the AVX2 kernels do exactly this, so they match the reference bit for bit.
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/ref/f16_table.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::ref {
namespace {

float dot_q8_0(int64_t n, const BlockQ8_0* w, const BlockQ8_0* x) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += w[b].qs[j] * x[b].qs[j];
    sum = std::fma(f16_to_f32(w[b].d) * f16_to_f32(x[b].d), static_cast<float>(isum), sum);
  }
  return sum;
}

float dot_q4_0(int64_t n, const BlockQ4_0* w, const BlockQ8_0* x) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      isum += ((w[b].qs[j] & 0x0f) - 8) * x[b].qs[j];
      isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + kQK4_0 / 2];
    }
    sum = std::fma(f16_to_f32(w[b].d) * f16_to_f32(x[b].d), static_cast<float>(isum), sum);
  }
  return sum;
}

float dot_f16(int64_t n, const uint16_t* w, const float* x) {
  const float* table = f16_table();
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += table[w[i]] * x[i];
  return sum;
}

float dot_bf16(int64_t n, const uint16_t* w, const float* x) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_f32(w[i]) * x[i];
  return sum;
}

}  // namespace

void vec_dot(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out) {
  switch (wtype) {
    case DType::kF32:
      *out = dot_f32(static_cast<const float*>(w_row), static_cast<const float*>(x_row), n);
      return;
    case DType::kF16:
      *out = dot_f16(n, static_cast<const uint16_t*>(w_row), static_cast<const float*>(x_row));
      return;
    case DType::kBF16:
      *out = dot_bf16(n, static_cast<const uint16_t*>(w_row), static_cast<const float*>(x_row));
      return;
    case DType::kQ8_0:
      HZ_CHECK(n % kQK8_0 == 0);
      *out = dot_q8_0(n, static_cast<const BlockQ8_0*>(w_row), static_cast<const BlockQ8_0*>(x_row));
      return;
    case DType::kQ4_0:
      HZ_CHECK(n % kQK4_0 == 0);
      *out = dot_q4_0(n, static_cast<const BlockQ4_0*>(w_row), static_cast<const BlockQ8_0*>(x_row));
      return;
    case DType::kQ4_K:
      *out = vec_dot_q4_k_q8_k(n, static_cast<const BlockQ4_K*>(w_row), static_cast<const BlockQ8_K*>(x_row));
      return;
    case DType::kQ5_K:
      *out = vec_dot_q5_k_q8_k(n, static_cast<const BlockQ5_K*>(w_row), static_cast<const BlockQ8_K*>(x_row));
      return;
    case DType::kQ6_K:
      *out = vec_dot_q6_k_q8_k(n, static_cast<const BlockQ6_K*>(w_row), static_cast<const BlockQ8_K*>(x_row));
      return;
    default:
      HZ_CHECK_MSG(false, "vec_dot: unsupported weight dtype");
  }
}

void matmul(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
            const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      vec_dot(wtype, n, wb + r * w_row_bytes, xb + t * x_row_bytes, &y[t * y_stride + r]);
    }
  }
}

void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(row_begin % 8 == 0);
  std::vector<uint8_t> row(row_bytes(wtype, n));
  std::vector<BlockQ8_0> xr(static_cast<size_t>(n / kQK8_0) * num_tokens);
  for (int64_t t = 0; t < num_tokens; ++t) unpack_activation_row(n, x, t, xr.data() + t * (n / kQK8_0));
  for (int64_t r = row_begin; r < row_end; ++r) {
    unpack_row(wtype, n, packed, r, row.data());
    for (int64_t t = 0; t < num_tokens; ++t) vec_dot(wtype, n, row.data(), xr.data() + t * (n / kQK8_0), &y[t * y_stride + r]);
  }
}

}  // namespace hz::kernels::ref
