// The tiled AVX2 matmul (F32/F16/BF16 weights) walks tokens in L2-sized blocks: outputs of
// tokens on both sides of a block boundary, and of a last partial block, equal vec_dot bit for bit;
// so do prefill-sized batches over many rows with partial tiles and non-finite activations.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels {
namespace {

TEST(MatmulTokenBlockTest, BlockBoundariesKeepVecDotBits) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2";
  // n = 8192: an f32 activation row is 32 KiB, so a token block holds about a dozen tokens and 29
  // tokens span three blocks (the last one partial).
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    const int64_t n = 8192, rows = 7, tokens = 29;
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

TEST(MatmulTokenBlockTest, PrefillBatchesKeepVecDotBits) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2";
  // n = 513 and 1031 (a 1- and 7-element zero-padded last step), 1536 (a token block of 64: 97
  // tokens cross it); 70 rows (a partial last row tile); 4, 50 and 97 tokens (partial token
  // tiles). Row ranges that start inside a tile.
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t n : {513, 1031, 1536}) {
      const int64_t rows = 70, max_tokens = 97;
      const auto w = test::make_weights(type, rows, n, 7 + static_cast<uint32_t>(n));
      auto x = test::make_activations(type, max_tokens, n, 8);
      if (type == DType::kF32) {
        // Non-finite activations reach the outputs as vec_dot gives them.
        reinterpret_cast<float*>(x.data())[5 * n + 600 % n] = std::numeric_limits<float>::infinity();
        reinterpret_cast<float*>(x.data())[60 * n + 3] = std::nanf("");
      }
      const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
      std::vector<float> expect(max_tokens * rows);
      for (int64_t t = 0; t < max_tokens; ++t) {
        for (int64_t r = 0; r < rows; ++r) avx2::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &expect[t * rows + r]);
      }
      for (int64_t tokens : {4, 50, 97}) {
        for (auto [rb, re] : {std::pair<int64_t, int64_t>{0, rows}, {3, 69}}) {
          std::vector<float> y(tokens * rows, std::nanf(""));
          avx2::matmul(type, n, w.data(), wrb, rb, re, x.data(), xrb, tokens, y.data(), rows);
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t r = rb; r < re; ++r) {
              ASSERT_EQ(test::float_bits(y[t * rows + r]), test::float_bits(expect[t * rows + r]))
                  << dtype_name(type) << " n=" << n << " tokens=" << tokens << " rows=[" << rb << "," << re << ") t=" << t
                  << " r=" << r;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hz::kernels
