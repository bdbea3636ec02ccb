// AVX2 k-quant dot products (Q4_K, Q5_K, Q6_K against Q8_K activations). Placeholder: forwards to
// the scalar reference until the vectorized kinds land.
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels::avx2 {

void vec_dot_kquant(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out) {
  ref::vec_dot(wtype, n, w_row, x_row, out);
}

void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  ref::matmul(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

}  // namespace hz::kernels::avx2
