// AVX2 k-quant dot products and matmuls (Q4_K, Q5_K, Q6_K against Q8_K activations). The dot kinds
// and the few-token matmul (up to 3 tokens, 4 rows at a time) are in kquant_quads.h, shared with the
// AVX-512 build; more tokens run the 8-row group kernel (matmul_kq_groups.h). All give the scalar
// reference's bits.
#include <cmath>
#include <cstddef>

#include "base/check.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/kquant_quads.h"
#include "kernels/avx2/matmul_kq_groups.h"
#include "kernels/avx2/matmul_tile.h"

namespace hz::kernels::avx2 {
namespace {

// 4 u8 x 4 s8 products per int32 lane with AVX2: maddubs to int16 pairs (at most 2 * 63 * 128, no
// saturation for 6-bit weights), madd with ones to int32. Exact, so equal to vpdpbusd's sums.
struct Avx2Dot {
  static __m256i dot4(__m256i acc, __m256i v, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(v, x), _mm256_set1_epi16(1)));
  }
};

}  // namespace

void vec_dot_kquant(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out) {
  HZ_CHECK(n % kQK_K == 0);
  switch (wtype) {
    case DType::kQ4_K:
      return vec_dot_kind<Q4_KKind>(n, w_row, x_row, out);
    case DType::kQ5_K:
      return vec_dot_kind<Q5_KKind>(n, w_row, x_row, out);
    case DType::kQ6_K:
      return vec_dot_kind<Q6_KKind>(n, w_row, x_row, out);
    default:
      HZ_CHECK_MSG(false, "vec_dot_kquant: not a k-quant");
  }
}

void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK_K == 0);
  switch (wtype) {
    case DType::kQ4_K:
      // Few tokens (decode): 4 rows at a time, nothing decoded beyond what their dots need. More: the
      // 8-row group kernel, which decodes a super-block once for up to 32 tokens. Both follow the
      // block-order rule, so the switch never changes a bit.
      if (num_tokens < kGroupMinTokens) {
        return matmul_quads<Q4_KKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
      }
      return kq::matmul_groups<kq::Q4KKind, Avx2Dot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                                     y_stride);
    case DType::kQ5_K:
      if (num_tokens < kGroupMinTokens) {
        return matmul_quads<Q5_KKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
      }
      return kq::matmul_groups<kq::Q5KKind, Avx2Dot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                                     y_stride);
    case DType::kQ6_K:
      if (num_tokens < kGroupMinTokens) {
        return matmul_quads<Q6_KKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
      }
      return kq::matmul_groups<kq::Q6KKind, Avx2Dot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                                     y_stride);
    default:
      HZ_CHECK_MSG(false, "matmul_kquant: not a k-quant");
  }
}

}  // namespace hz::kernels::avx2
