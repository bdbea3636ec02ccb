// Q4_0/Q8_0 matmul: the AVX2 kernels (GGUF rows and the packed layout) against the scalar reference,
// bit for bit, over token counts 1..40 (crossing the kernel's token chunk), row counts that are not
// multiples of the 8-row group, odd row ranges, wide output strides, extreme and non-finite
// activations and Q8_0 weights holding -128; and the packed layout's round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels {
namespace {

using test::make_activations;
using test::make_weights;
using test::random_floats;

#define SKIP_WITHOUT_AVX2() \
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks avx2/fma/f16c"

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, 4) == 0;
}

class QuantMatmulTest : public ::testing::TestWithParam<DType> {};

// Q8_0 weights straight from random bytes: every int8 value including -128, small finite scales.
std::vector<uint8_t> random_q8_0_bytes(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(row_bytes(DType::kQ8_0, n) * rows);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  for (size_t b = 0; b < w.size() / sizeof(BlockQ8_0); ++b) {
    const uint16_t d = f32_to_f16(0.01f + 0.001f * static_cast<float>(rng() % 100));
    std::memcpy(w.data() + b * sizeof(BlockQ8_0), &d, 2);
  }
  return w;
}

TEST_P(QuantMatmulTest, PackRoundTripsEveryRow) {
  const DType type = GetParam();
  for (int64_t rows : {1, 7, 8, 9, 19}) {
    for (int64_t n : {32, 96, 2048}) {
      auto w = make_weights(type, rows, n, 10 + static_cast<uint32_t>(rows * n));
      const uint64_t rb = row_bytes(type, n);
      std::vector<uint8_t> packed(packed_bytes(type, rows, n));
      EXPECT_EQ(packed.size(), rb * ((rows + 7) / 8 * 8));  // same bytes per row, groups padded
      pack_weights(type, n, w.data(), rb, rows, packed.data());
      std::vector<uint8_t> row(rb);
      for (int64_t r = 0; r < rows; ++r) {
        unpack_row(type, n, packed.data(), r, row.data());
        EXPECT_EQ(0, std::memcmp(row.data(), w.data() + r * rb, rb)) << "rows=" << rows << " n=" << n << " r=" << r;
      }
    }
  }
}

TEST(QuantMatmulPackTest, ActivationsRoundTripForEveryToken) {
  const int64_t n = 96;
  for (int64_t tokens : {1, 31, 32, 33, 70}) {
    auto x = make_activations(DType::kQ8_0, tokens, n, 9);
    std::vector<uint8_t> xp(packed_activation_bytes(n, tokens));
    pack_activations(n, reinterpret_cast<const BlockQ8_0*>(x.data()), row_bytes(DType::kQ8_0, n), tokens, xp.data());
    std::vector<BlockQ8_0> row(n / 32);
    for (int64_t t = 0; t < tokens; ++t) {
      unpack_activation_row(n, xp.data(), t, row.data());
      EXPECT_EQ(0, std::memcmp(row.data(), x.data() + t * row_bytes(DType::kQ8_0, n), row_bytes(DType::kQ8_0, n)))
          << "tokens=" << tokens << " t=" << t;
    }
  }
}

TEST_P(QuantMatmulTest, VecDotIsBitIdenticalToReference) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  for (int64_t n : {32, 64, 96, 4096}) {
    auto w = make_weights(type, 3, n, 100 + static_cast<uint32_t>(n));
    auto x = make_activations(type, 2, n, 200 + static_cast<uint32_t>(n));
    const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
    for (int r = 0; r < 3; ++r) {
      for (int t = 0; t < 2; ++t) {
        float got, want;
        avx2::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &got);
        ref::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &want);
        EXPECT_TRUE(same_bits(got, want)) << dtype_name(type) << " n=" << n << ": " << got << " vs " << want;
      }
    }
  }
}

// Every output of both AVX2 matmuls equals ref::vec_dot of its (row, token), bit for bit, whatever
// the token count, row range, stride and layout.
void check_matmul(DType type, int64_t n, const std::vector<uint8_t>& w, int64_t rows, const std::vector<uint8_t>& x,
                  int64_t max_tokens, const std::string& what) {
  const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
  std::vector<float> want(rows * max_tokens);
  for (int64_t t = 0; t < max_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) ref::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &want[t * rows + r]);
  }
  std::vector<uint8_t> packed(packed_bytes(type, rows, n));
  pack_weights(type, n, w.data(), wrb, rows, packed.data());
  std::vector<uint8_t> xp(packed_activation_bytes(n, max_tokens));
  const int64_t stride = rows + 5;
  const float sentinel = -12345.0f;
  for (int64_t tokens = 1; tokens <= max_tokens; tokens += (tokens < 17 ? 1 : 11)) {
    // GGUF rows: any range; packed: ranges starting on a group.
    const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, rows}, {rows / 3, rows - rows / 4}};
    for (int layout = 0; layout < 2; ++layout) {
      for (auto [rb, re] : ranges) {
        if (layout == 1) rb = rb / 8 * 8;
        std::vector<float> y(stride * tokens, sentinel);
        if (layout == 0) {
          avx2::matmul(type, n, w.data(), wrb, rb, re, x.data(), xrb, tokens, y.data(), stride);
        } else {
          pack_activations(n, reinterpret_cast<const BlockQ8_0*>(x.data()), xrb, tokens, xp.data());
          avx2::matmul_packed(type, n, packed.data(), rb, re, xp.data(), tokens, y.data(), stride);
        }
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < stride; ++r) {
            const float got = y[t * stride + r];
            if (r < rb || r >= re) {
              ASSERT_EQ(got, sentinel) << what << ": wrote outside rows [" << rb << ", " << re << ") at " << r;
            } else {
              ASSERT_TRUE(same_bits(got, want[t * rows + r]))
                  << what << (layout ? " packed" : " rows") << " tokens=" << tokens << " range=[" << rb << "," << re
                  << ") r=" << r << " t=" << t << ": " << got << " vs " << want[t * rows + r];
            }
          }
        }
      }
    }
  }
}

TEST_P(QuantMatmulTest, MatmulIsBitIdenticalToReferenceForAnyBatch) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  for (int64_t rows : {1, 5, 8, 13, 24, 35}) {
    for (int64_t n : {32, 160}) {
      auto w = make_weights(type, rows, n, 300 + static_cast<uint32_t>(rows));
      auto x = make_activations(type, 40, n, 400 + static_cast<uint32_t>(n));
      check_matmul(type, n, w, rows, x, 40, std::string(dtype_name(type)) + " rows=" + std::to_string(rows) + " n=" +
                                                std::to_string(n));
    }
  }
}

TEST_P(QuantMatmulTest, ExtremeAndNonFiniteActivations) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  const int64_t n = 96, rows = 11, tokens = 6;
  auto w = type == DType::kQ8_0 ? random_q8_0_bytes(rows, n, 5) : make_weights(type, rows, n, 900);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> inputs = {std::vector<float>(n, 0.0f), std::vector<float>(n, -3e4f),
                                            random_floats(n, 5, -1e6f, 1e6f), random_floats(n, 6, -1e30f, 1e30f),
                                            random_floats(n, 7), random_floats(n, 8)};
  inputs[1][5] = 3e4f;
  inputs[4][40] = inf;
  inputs[5][3] = std::numeric_limits<float>::quiet_NaN();
  const uint64_t xrb = activation_row_bytes(type, n);
  std::vector<uint8_t> x(xrb * tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    ref::quantize_row_q8_0(inputs[t].data(), reinterpret_cast<BlockQ8_0*>(x.data() + t * xrb), n);
  }
  check_matmul(type, n, w, rows, x, tokens, std::string(dtype_name(type)) + " edge activations");
}

TEST(QuantMatmulQ8Test, WeightsHoldingMinus128) {
  SKIP_WITHOUT_AVX2();
  const int64_t n = 256, rows = 17;
  auto w = random_q8_0_bytes(rows, n, 77);
  auto x = make_activations(DType::kQ8_0, 19, n, 78);
  check_matmul(DType::kQ8_0, n, w, rows, x, 19, "q8_0 random bytes");
}

// The dispatched entry point follows the forced ISA and both agree (the scalar path unpacks rows).
TEST_P(QuantMatmulTest, PackedScalarPathMatchesAvx2) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  const int64_t n = 128, rows = 21, tokens = 3;
  auto w = make_weights(type, rows, n, 55);
  auto x = make_activations(type, tokens, n, 56);
  std::vector<uint8_t> packed(packed_bytes(type, rows, n));
  pack_weights(type, n, w.data(), row_bytes(type, n), rows, packed.data());
  const uint64_t xrb = activation_row_bytes(type, n);
  std::vector<uint8_t> xp(packed_activation_bytes(n, tokens));
  pack_activations(n, reinterpret_cast<const BlockQ8_0*>(x.data()), xrb, tokens, xp.data());
  std::vector<float> a(rows * tokens), b(rows * tokens);
  const Isa before = active_isa();
  force_isa(Isa::kScalar);
  matmul_packed(type, n, packed.data(), 8, rows, xp.data(), tokens, a.data(), rows);
  force_isa(Isa::kAvx2);
  matmul_packed(type, n, packed.data(), 8, rows, xp.data(), tokens, b.data(), rows);
  force_isa(before);
  for (int64_t i = 0; i < rows * tokens; ++i) {
    if (i % rows < 8) continue;
    EXPECT_TRUE(same_bits(a[i], b[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantMatmulTest, ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace hz::kernels
