// The Q4_K / Q5_K / Q6_K matmuls (AVX2 and AVX-512 VNNI; up to 3 tokens 4 rows at a time, on AVX-512
// with 512-bit VNNI dots, more in 8-row groups) against the scalar reference, bit for bit: random blocks (every nibble, 6-bit scale and min), extreme blocks (all quants and scales at
// their maxima, activations at -128 / 127), row ranges that are not multiples of 8 (on AVX-512, 9-16
// rows run as one 512-bit pair of groups, 17-24 as a pair and a 256-bit group), token counts
// around the 32-token chunk and several super-blocks per row. Also: one token and many tokens give
// the same bits (the block-order rule), and vec_dot agrees with the matmul.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels {
namespace {

using test::float_bits;

constexpr float kSentinel = -12345.0f;

// Random k-quant rows: every byte random (all quants and 6-bit scales/mins reachable), f16 scales
// set to small finite values.
std::vector<uint8_t> random_rows(DType type, int64_t rows, int64_t n, uint32_t seed) {
  return test::make_weights(type, rows, n, seed);
}

// Extreme rows: every quant at its maximum, every scale/min at its maximum (Q6_K: int8 scales at
// -128 and 127 alternating), large f16 scales.
std::vector<uint8_t> extreme_rows(DType type, int64_t rows, int64_t n) {
  std::vector<uint8_t> w(row_bytes(type, n) * rows, 0xff);
  const uint64_t bb = traits(type).block_bytes;
  const uint16_t d = f32_to_f16(3.0f), dmin = f32_to_f16(2.0f);
  for (uint64_t b = 0; b < w.size() / bb; ++b) {
    uint8_t* blk = w.data() + b * bb;
    if (type == DType::kQ6_K) {
      for (int g = 0; g < 16; ++g) blk[192 + g] = static_cast<uint8_t>(g % 2 == 0 ? 0x80 : 0x7f);
      std::memcpy(blk + 208, &d, 2);
    } else {
      std::memcpy(blk, &d, 2);
      std::memcpy(blk + 2, &dmin, 2);
    }
  }
  return w;
}

// Q8_K activations whose quants are all -128 (even tokens) or 127 (odd tokens), bsums to match.
std::vector<uint8_t> extreme_activations(int64_t tokens, int64_t n) {
  std::vector<uint8_t> x(sizeof(BlockQ8_K) * (n / kQK_K) * tokens);
  auto* blocks = reinterpret_cast<BlockQ8_K*>(x.data());
  for (int64_t i = 0; i < tokens * (n / kQK_K); ++i) {
    const int8_t q = (i / (n / kQK_K)) % 2 == 0 ? -128 : 127;
    BlockQ8_K& b = blocks[i];
    b.d = 0.25f;
    std::memset(b.qs, static_cast<uint8_t>(q), sizeof(b.qs));
    for (int g = 0; g < 16; ++g) b.bsums[g] = static_cast<int16_t>(16 * q);
  }
  return x;
}

using MatmulFn = void (*)(DType, int64_t, const void*, uint64_t, int64_t, int64_t, const void*, uint64_t, int64_t, float*,
                          int64_t);

// Checks fn against ref::vec_dot for every (token, row) of [rb, re), with sentinels elsewhere.
void expect_matches_ref(MatmulFn fn, DType type, int64_t n, const std::vector<uint8_t>& w, int64_t rows,
                        const std::vector<uint8_t>& x, int64_t tokens, int64_t rb, int64_t re, const char* what) {
  const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
  std::vector<float> y(tokens * rows, kSentinel);
  fn(type, n, w.data(), wrb, rb, re, x.data(), xrb, tokens, y.data(), rows);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      if (r < rb || r >= re) {
        ASSERT_EQ(y[t * rows + r], kSentinel) << what << " wrote outside its rows: t=" << t << " r=" << r;
        continue;
      }
      float expect;
      ref::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &expect);
      ASSERT_EQ(float_bits(y[t * rows + r]), float_bits(expect))
          << what << " " << dtype_name(type) << " n=" << n << " tokens=" << tokens << " rows=[" << rb << "," << re
          << ") t=" << t << " r=" << r << ": " << y[t * rows + r] << " vs " << expect;
    }
  }
}

std::vector<std::pair<MatmulFn, const char*>> kernels_under_test() {
  std::vector<std::pair<MatmulFn, const char*>> k;
  if (isa_supported(Isa::kAvx2)) k.emplace_back(&avx2::matmul_kquant, "avx2");
  if (vnni_supported()) {
    k.emplace_back(&vnni::matmul_kquant, "vnni");
    k.emplace_back(&vnni::matmul_kquant_ymm, "vnni-ymm");
    k.emplace_back(&vnni::matmul_kquant_split, "vnni-split");
    k.emplace_back(&vnni::matmul_kquant_few, "vnni-few");  // the 512-bit decode kernel at every token count
  }
  return k;
}

class KQuantGroupMatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(KQuantGroupMatmulTest, RandomBlocksMatchReferenceBitForBit) {
  const DType type = GetParam();
  const auto kernels = kernels_under_test();
  if (kernels.empty()) GTEST_SKIP() << "CPU lacks AVX2";
  const int64_t rows = 21;
  for (int64_t n : {int64_t{256}, int64_t{768}}) {
    const auto w = random_rows(type, rows, n, 11);
    const auto x = test::make_activations(type, 70, n, 12);
    const std::pair<int64_t, int64_t> ranges[] = {{0, rows}, {0, 8}, {3, 10}, {5, 6}, {8, 21}, {13, 21}};
    for (auto [fn, name] : kernels) {
      for (int64_t tokens : {1, 2, 4, 5, 6, 7, 12, 13, 31, 32, 33, 70}) {
        for (auto [rb, re] : ranges) expect_matches_ref(fn, type, n, w, rows, x, tokens, rb, re, name);
      }
    }
  }
}

TEST_P(KQuantGroupMatmulTest, ExtremeBlocksMatchReferenceBitForBit) {
  const DType type = GetParam();
  const auto kernels = kernels_under_test();
  if (kernels.empty()) GTEST_SKIP() << "CPU lacks AVX2";
  const int64_t rows = 9, n = 512;
  const auto w = extreme_rows(type, rows, n);
  const auto x = extreme_activations(35, n);
  for (auto [fn, name] : kernels) {
    for (int64_t tokens : {1, 3, 35}) {
      expect_matches_ref(fn, type, n, w, rows, x, tokens, 0, rows, name);
      expect_matches_ref(fn, type, n, w, rows, x, tokens, 1, 9, name);
    }
  }
}

// Batch invariance and the vec_dot contract: a token's outputs do not depend on how many other
// tokens share the call, and equal avx2::vec_dot.
TEST_P(KQuantGroupMatmulTest, OneTokenAndManyTokensGiveTheSameBits) {
  const DType type = GetParam();
  const auto kernels = kernels_under_test();
  if (kernels.empty()) GTEST_SKIP() << "CPU lacks AVX2";
  const int64_t rows = 16, n = 1024, tokens = 40;
  const auto w = random_rows(type, rows, n, 21);
  const auto x = test::make_activations(type, tokens, n, 22);
  const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
  for (auto [fn, name] : kernels) {
    std::vector<float> all(tokens * rows);
    fn(type, n, w.data(), wrb, 0, rows, x.data(), xrb, tokens, all.data(), rows);
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<float> one(rows);
      fn(type, n, w.data(), wrb, 0, rows, x.data() + t * xrb, xrb, 1, one.data(), rows);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(float_bits(one[r]), float_bits(all[t * rows + r])) << name << " t=" << t << " r=" << r;
        float v;
        avx2::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &v);
        ASSERT_EQ(float_bits(v), float_bits(one[r])) << name << " vec_dot t=" << t << " r=" << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KQuants, KQuantGroupMatmulTest, ::testing::Values(DType::kQ4_K, DType::kQ5_K, DType::kQ6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace hz::kernels
