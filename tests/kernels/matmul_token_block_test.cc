// The tiled AVX2 matmul (F32/F16/BF16 and Q5_K weights) walks tokens in L2-sized blocks: outputs of
// tokens on both sides of a block boundary, and of a last partial block, equal vec_dot bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels {
namespace {

TEST(MatmulTokenBlockTest, BlockBoundariesKeepVecDotBits) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2";
  // n = 8192: an f32 activation row is 32 KiB, so a token block holds about a dozen tokens and 29
  // tokens span three blocks (the last one partial); Q5_K's Q8_K rows are smaller (two blocks).
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ5_K}) {
    const int64_t n = type == DType::kQ5_K ? 65536 : 8192, rows = 7, tokens = 29;
    const auto w = test::make_weights(type, rows, n, 5);
    const auto x = test::make_activations(type, tokens, n, 6);
    const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
    std::vector<float> y(tokens * rows, std::nanf(""));
    avx2::matmul(type, n, w.data(), wrb, 0, rows, x.data(), xrb, tokens, y.data(), rows);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        float expect;
        avx2::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &expect);
        ASSERT_EQ(test::float_bits(y[t * rows + r]), test::float_bits(expect)) << dtype_name(type) << " t=" << t << " r=" << r;
      }
    }
  }
}

}  // namespace
}  // namespace hz::kernels
