// AVX2 vec_dot and matmul entry points. F32, F16, BF16 (f32 activations) are "kinds" for the tiled
// driver in matmul_tile.h, so matmul == vec_dot bit for bit; Q8_0/Q4_0 live in matmul_q.cc.
#include <cstddef>

#include "base/check.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/matmul_tile.h"

namespace hz::kernels::avx2 {
namespace {

// ---- float weights: one step = 8 elements, one FMA per (row, token) ----
template <class Load>
struct FloatKind {
  static constexpr int kStep = 8;
  static constexpr bool kHasTail = true;
  static constexpr int kMaxRows = 4;
  static constexpr int kMaxTokens = 3;
  using W = __m256;
  using X = __m256;
  static W load_w(const uint8_t* row, int64_t s) { return Load::load(row, s * 8); }
  static W load_w_tail(const uint8_t* row, int64_t s, int64_t count) { return Load::load_partial(row, s * 8, count); }
  static X load_x(const uint8_t* row, int64_t s) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + s * 8); }
  static X load_x_tail(const uint8_t* row, int64_t s, int64_t count) {
    return load_f32_partial(reinterpret_cast<const float*>(row) + s * 8, count);
  }
  static __m256 fold(W w, X x, __m256 acc) { return _mm256_fmadd_ps(w, x, acc); }
  static float finish(__m256 acc) { return hsum(acc); }
};

struct LoadF32 {
  static __m256 load(const uint8_t* row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static __m256 load_partial(const uint8_t* row, int64_t i, int64_t count) {
    return load_f32_partial(reinterpret_cast<const float*>(row) + i, count);
  }
};
struct LoadF16 {
  static __m256 load(const uint8_t* row, int64_t i) { return load_f16(reinterpret_cast<const uint16_t*>(row) + i); }
  static __m256 load_partial(const uint8_t* row, int64_t i, int64_t count) {
    return load_f16_partial(reinterpret_cast<const uint16_t*>(row) + i, count);
  }
};
struct LoadBF16 {
  static __m256 load(const uint8_t* row, int64_t i) { return load_bf16(reinterpret_cast<const uint16_t*>(row) + i); }
  static __m256 load_partial(const uint8_t* row, int64_t i, int64_t count) {
    return load_bf16_partial(reinterpret_cast<const uint16_t*>(row) + i, count);
  }
};

using F32Kind = FloatKind<LoadF32>;
using F16Kind = FloatKind<LoadF16>;
using BF16Kind = FloatKind<LoadBF16>;

}  // namespace

void vec_dot(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out) {
  switch (wtype) {
    case DType::kF32:
      return vec_dot_kind<F32Kind>(n, w_row, x_row, out);
    case DType::kF16:
      return vec_dot_kind<F16Kind>(n, w_row, x_row, out);
    case DType::kBF16:
      return vec_dot_kind<BF16Kind>(n, w_row, x_row, out);
    case DType::kQ8_0:
      HZ_CHECK(n % kQK8_0 == 0);
      return vec_dot_q8_0(n, w_row, x_row, out);
    case DType::kQ4_0:
      HZ_CHECK(n % kQK4_0 == 0);
      return vec_dot_q4_0(n, w_row, x_row, out);
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      HZ_CHECK(n % kQK_K == 0);
      return vec_dot_kquant(wtype, n, w_row, x_row, out);
    default:
      HZ_CHECK_MSG(false, "vec_dot: unsupported weight dtype");
  }
}

void matmul(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
            const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  switch (wtype) {
    case DType::kF32:
      return matmul_kind<F32Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kF16:
      return matmul_kind<F16Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kBF16:
      return matmul_kind<BF16Kind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ8_0:
      HZ_CHECK(n % kQK8_0 == 0);
      return matmul_q8_0(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ4_0:
      HZ_CHECK(n % kQK4_0 == 0);
      return matmul_q4_0(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      HZ_CHECK(n % kQK_K == 0);
      return matmul_kquant(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    default:
      HZ_CHECK_MSG(false, "matmul: unsupported weight dtype");
  }
}

}  // namespace hz::kernels::avx2
