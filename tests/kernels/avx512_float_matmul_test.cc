// The AVX-512 float-weight matmuls (two rows per 512-bit register, two tokens per register, and
// 16-row tiles of short rows reduced together)
// against the AVX2 kernel, bit for bit (whole output buffers, sentinels included; any NaN matches any NaN), and against the scalar reference
// within a tolerance: F32, F16, BF16 weights; n with and without a tail step; odd row ranges (the
// last row of an odd range shares a register with itself); token counts around the tiles (12 tokens
// for row pairs, 4 pairs for token pairs, whose odd last token shares a register with itself) and
// the token block; random, huge, zero, NaN and Inf inputs. Also the public entry point with
// the AVX-512 variants switched on and off.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels {
namespace {

using test::float_bits;
using test::random_floats;

constexpr float kSentinel = -12345.0f;

// Weights of `type` from floats (the reference converters round to nearest even).
std::vector<uint8_t> to_weights(DType type, const std::vector<float>& f, int64_t rows, int64_t n) {
  const uint64_t rb = row_bytes(type, n);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = f.data() + r * n;
    uint8_t* dst = w.data() + r * rb;
    if (type == DType::kF32) std::memcpy(dst, src, n * 4);
    if (type == DType::kF16) ref::f32_to_f16_row(src, reinterpret_cast<uint16_t*>(dst), n);
    if (type == DType::kBF16) ref::f32_to_bf16_row(src, reinterpret_cast<uint16_t*>(dst), n);
  }
  return w;
}

struct Case {
  int64_t n, rows, tokens;
  std::vector<uint8_t> w;
  std::vector<float> x;
};

enum class Kernel { kAvx2, kRowPairs, kTokenPairs, kShortRows };
constexpr Kernel kWide[] = {Kernel::kRowPairs, Kernel::kTokenPairs, Kernel::kShortRows};
const char* name(Kernel k) {
  return k == Kernel::kRowPairs     ? "row pairs"
         : k == Kernel::kTokenPairs ? "token pairs"
         : k == Kernel::kShortRows  ? "short rows"
                                    : "avx2";
}

// y[t * stride + r] for r in [rb, re), the sentinel elsewhere.
std::vector<float> run(Kernel k, DType type, const Case& c, int64_t rb, int64_t re, int64_t tokens) {
  const int64_t stride = c.rows + 3;
  std::vector<float> y(stride * tokens, kSentinel);
  auto fn = k == Kernel::kRowPairs     ? vnni::matmul_float
            : k == Kernel::kTokenPairs ? vnni::matmul_float_token_pairs
            : k == Kernel::kShortRows  ? vnni::matmul_float_short_rows
                                       : avx2::matmul;
  fn(type, c.n, c.w.data(), row_bytes(type, c.n), rb, re, c.x.data(), c.n * 4, tokens, y.data(), stride);
  return y;
}

void expect_same_as_avx2(DType type, const Case& c, const std::string& what) {
  const int64_t stride = c.rows + 3;
  for (int64_t tokens : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{7}, int64_t{8}, int64_t{9},
                         int64_t{11}, int64_t{12}, int64_t{13}, int64_t{25}, c.tokens}) {
    if (tokens > c.tokens) continue;
    const std::pair<int64_t, int64_t> ranges[] = {{0, c.rows}, {1, c.rows - 2}, {2, 3}, {c.rows - 1, c.rows}, {3, c.rows}};
    for (auto [rb, re] : ranges) {
      if (re <= rb || rb < 0 || re > c.rows) continue;
      const auto want = run(Kernel::kAvx2, type, c, rb, re, tokens);
      for (Kernel k : kWide) {
        const auto got = run(k, type, c, rb, re, tokens);
        int64_t i = 0;
        while (i < static_cast<int64_t>(want.size()) && test::same_bits_or_nan(got[i], want[i])) ++i;
        if (i == static_cast<int64_t>(want.size())) continue;
        FAIL() << what << " " << name(k) << " " << dtype_name(type) << " n=" << c.n << " tokens=" << tokens
               << " range=[" << rb << "," << re << ") first difference at t=" << i / stride << " r=" << i % stride
               << ": " << got[i] << " vs avx2 " << want[i];
      }
    }
  }
}

Case random_case(DType type, int64_t n, int64_t rows, int64_t tokens, uint32_t seed, float lo, float hi) {
  Case c{n, rows, tokens, {}, random_floats(tokens * n, seed + 1, lo, hi)};
  c.w = to_weights(type, random_floats(rows * n, seed, lo, hi), rows, n);
  return c;
}

class Avx512FloatMatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(Avx512FloatMatmulTest, RandomInputsMatchAvx2) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  uint32_t seed = 10;
  for (int64_t n : {8, 16, 64, 72, 256, 1000, 1027, 3, 1}) {
    for (int64_t rows : {1, 2, 5, 9, 13, 16, 17, 35}) {
      expect_same_as_avx2(type, random_case(type, n, rows, 30, seed++, -1.0f, 1.0f), "random");
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(Avx512FloatMatmulTest, ExtremeInputsMatchAvx2) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  const int64_t n = 45, rows = 7, tokens = 14;
  // Large magnitudes (overflow to Inf inside a chain, then Inf - Inf = NaN), exact zeros and -0.
  expect_same_as_avx2(type, random_case(type, n, rows, tokens, 3, -6e4f, 6e4f), "large");
  Case zeros{n, rows, tokens, to_weights(type, std::vector<float>(rows * n, -0.0f), rows, n),
             std::vector<float>(tokens * n, 0.0f)};
  expect_same_as_avx2(type, zeros, "signed zeros");
  // NaN and Inf scattered over weights and activations.
  Case c = random_case(type, n, rows, tokens, 4, -2.0f, 2.0f);
  std::vector<float> wf = random_floats(rows * n, 5, -2.0f, 2.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (int64_t i = 0; i < rows * n; i += 17) wf[i] = specials[i % 3];
  for (int64_t i = 5; i < tokens * n; i += 23) c.x[i] = specials[i % 3];
  c.w = to_weights(type, wf, rows, n);
  expect_same_as_avx2(type, c, "nan/inf");
  // Subnormal weights (F16 subnormals convert exactly) against large activations.
  std::vector<float> tiny = random_floats(rows * n, 6, -1e-6f, 1e-6f);
  Case sub{n, rows, tokens, to_weights(type, tiny, rows, n), random_floats(tokens * n, 7, -1e4f, 1e4f)};
  expect_same_as_avx2(type, sub, "subnormal");
}

// More tokens than one token block (384 KiB of activations: 96 tokens of n = 1024).
TEST_P(Avx512FloatMatmulTest, TokenBlocksMatchAvx2) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  expect_same_as_avx2(type, random_case(type, 1024, 6, 200, 21, -1.0f, 1.0f), "blocks");
}

// The arithmetic is the AVX2 kernel's, which sums in 8 lanes; the reference sums left to right.
TEST_P(Avx512FloatMatmulTest, CloseToTheScalarReference) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  const Case c = random_case(type, 777, 5, 17, 31, -1.0f, 1.0f);
  const uint64_t rb = row_bytes(type, c.n);
  for (Kernel k : kWide) {
    const auto got = run(k, type, c, 0, c.rows, c.tokens);
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t r = 0; r < c.rows; ++r) {
        float want = 0.0f;
        ref::vec_dot(type, c.n, c.w.data() + r * rb, c.x.data() + t * c.n, &want);
        EXPECT_NEAR(got[t * (c.rows + 3) + r], want, 1e-4f * std::sqrt(static_cast<float>(c.n)))
            << name(k) << " " << t << "," << r;
      }
    }
  }
}

// Through kernels::matmul: the AVX-512 variants on and off give the same bits.
TEST_P(Avx512FloatMatmulTest, DispatchSwitchKeepsBits) {
  const DType type = GetParam();
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks avx2";
  const bool before = vnni_enabled();
  const Isa isa_before = active_isa();
  force_isa(Isa::kAvx2);
  // 20 tokens, and 1 and 2 (the short-row kernel's), over 37 rows.
  const Case c = random_case(type, 200, 37, 20, 41, -1.0f, 1.0f);
  auto once = [&] {
    std::vector<float> y(c.rows * (c.tokens + 3), kSentinel);
    matmul(type, c.n, c.w.data(), row_bytes(type, c.n), 0, c.rows, c.x.data(), c.n * 4, c.tokens, y.data(), c.rows);
    for (int64_t tokens : {1, 2}) {
      matmul(type, c.n, c.w.data(), row_bytes(type, c.n), 0, c.rows, c.x.data(), c.n * 4, tokens,
             y.data() + c.rows * (c.tokens + tokens - 1), c.rows);
    }
    return y;
  };
  force_vnni(false);
  const auto off = once();
  // The AVX2 result is the reference's up to rounding: a broken entry point cannot pass unseen.
  float want = 0.0f;
  ref::vec_dot(type, c.n, c.w.data(), c.x.data(), &want);
  EXPECT_NEAR(off[0], want, 1e-3f);
  if (vnni_supported()) {
    force_vnni(true);
    const bool split_before = vnni_split_enabled();
    // Both the 512-bit kernel everywhere and the Zen 4 choice (the AVX2 kernel from 16 tokens).
    for (bool split : {false, true}) {
      force_vnni_split(split);
      const auto on = once();
      EXPECT_EQ(0, std::memcmp(on.data(), off.data(), on.size() * sizeof(float))) << "split " << split;
    }
    force_vnni_split(split_before);
  }
  force_vnni(before);
  force_isa(isa_before);
}

INSTANTIATE_TEST_SUITE_P(Types, Avx512FloatMatmulTest, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace hz::kernels
