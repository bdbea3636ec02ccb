// The randomized Walsh-Hadamard rotation of KV rows: the scalar reference against a dense
// orthogonal matrix built independently, round trips, and the AVX2 variant bit for bit against the
// reference (random rows, edge values, head dims 1-256 including non-powers of two).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/hadamard.h"

namespace hz::kernels {
namespace {

using test::float_bits;
using test::random_floats;

const int64_t kDims[] = {1, 2, 3, 5, 7, 8, 9, 12, 16, 24, 31, 32, 40, 48, 64, 80, 96, 100, 112, 128, 160, 192, 255, 256};

std::vector<float> random_signs(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> s(n);
  for (auto& v : s) v = (rng() & 1) ? 1.0f : -1.0f;
  return s;
}

// The rotation as a dense matrix, built from the definition (Sylvester's H(i, j) = (-1)^popcount(i & j)
// per block), not from the butterflies.
std::vector<double> dense_rotation(int64_t n, const std::vector<float>& signs) {
  std::vector<double> m(n * n, 0.0);
  for (int64_t b = 0; b < n;) {
    const int64_t len = hadamard_block(n, b);
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t j = 0; j < len; ++j) {
        const double h = (__builtin_popcountll(static_cast<uint64_t>(i & j)) & 1) ? -1.0 : 1.0;
        m[(b + i) * n + (b + j)] = h / std::sqrt(static_cast<double>(len)) * signs[b + j];
      }
    }
    b += len;
  }
  return m;
}

TEST(HadamardTest, BlocksFollowTheBinaryDecompositionOfTheHeadDim) {
  EXPECT_EQ(hadamard_block(96, 0), 64);
  EXPECT_EQ(hadamard_block(96, 64), 32);
  EXPECT_EQ(hadamard_block(7, 0), 4);
  EXPECT_EQ(hadamard_block(7, 4), 2);
  EXPECT_EQ(hadamard_block(7, 6), 1);
  EXPECT_EQ(hadamard_block(128, 0), 128);
}

TEST(HadamardTest, ReferenceEqualsTheDenseOrthogonalMatrix) {
  for (int64_t n : kDims) {
    SCOPED_TRACE(n);
    const auto signs = random_signs(n, 11 + static_cast<uint32_t>(n));
    const auto m = dense_rotation(n, signs);
    const int64_t rows = 3;
    auto x = random_floats(rows * n, 5 + static_cast<uint32_t>(n), -4.0f, 4.0f);
    auto y = x;
    ref::hadamard_rows(y.data(), rows, n, signs.data(), 0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        double want = 0;
        for (int64_t j = 0; j < n; ++j) want += m[i * n + j] * x[r * n + j];
        EXPECT_NEAR(y[r * n + i], want, 1e-5 * (1 + std::fabs(want)) + 1e-5) << "row " << r << " elem " << i;
      }
    }
    // The inverse undoes it, and the rotation keeps the norm.
    std::vector<float> back = y;
    ref::hadamard_rows(back.data(), rows, n, signs.data(), 1);
    for (int64_t r = 0; r < rows; ++r) {
      double nx = 0, ny = 0;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(back[r * n + i], x[r * n + i], 1e-5) << "row " << r << " elem " << i;
        nx += static_cast<double>(x[r * n + i]) * x[r * n + i];
        ny += static_cast<double>(y[r * n + i]) * y[r * n + i];
      }
      EXPECT_NEAR(ny, nx, 1e-4 * nx);
    }
  }
}

TEST(HadamardTest, RotatedDotProductsAreUnchanged) {
  // q.k == (Rq).(Rk): why rotating the query with the keys leaves attention scores alone.
  const int64_t n = 64;
  const auto signs = random_signs(n, 3);
  auto q = random_floats(n, 1), k = random_floats(n, 2);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) want += static_cast<double>(q[i]) * k[i];
  ref::hadamard_rows(q.data(), 1, n, signs.data(), 0);
  ref::hadamard_rows(k.data(), 1, n, signs.data(), 0);
  double got = 0;
  for (int64_t i = 0; i < n; ++i) got += static_cast<double>(q[i]) * k[i];
  EXPECT_NEAR(got, want, 1e-5);
}

TEST(HadamardTest, SpreadsAnOutlierChannelOverTheRow) {
  const int64_t n = 32;
  std::vector<float> x(n, 0.0f);
  x[5] = 20.0f;
  const auto signs = random_signs(n, 9);
  ref::hadamard_rows(x.data(), 1, n, signs.data(), 0);
  for (float v : x) EXPECT_FLOAT_EQ(std::fabs(v), 20.0f / std::sqrt(32.0f));
}

TEST(HadamardTest, Avx2IsBitIdenticalToReference) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks avx2/fma/f16c";
  const float inf = std::numeric_limits<float>::infinity();
  const float edge[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 3e38f, -3e38f, 1.0f, -1.0f, inf, 65504.0f, 1e-8f};
  for (int64_t n : kDims) {
    SCOPED_TRACE(n);
    const auto signs = random_signs(n, 21 + static_cast<uint32_t>(n));
    for (int32_t inverse = 0; inverse < 2; ++inverse) {
      for (int trial = 0; trial < 3; ++trial) {
        const int64_t rows = 1 + trial * 2;
        auto x = random_floats(rows * n, 100 + static_cast<uint32_t>(n * 7 + trial), -100.0f, 100.0f);
        if (trial == 2) {
          for (size_t i = 0; i < x.size(); ++i) x[i] = edge[(i * 7 + n) % (sizeof(edge) / sizeof(edge[0]))];
        }
        auto a = x, b = x;
        ref::hadamard_rows(a.data(), rows, n, signs.data(), inverse);
        avx2::hadamard_rows(b.data(), rows, n, signs.data(), inverse);
        for (size_t i = 0; i < a.size(); ++i) {
          if (std::isnan(a[i])) {
            EXPECT_TRUE(std::isnan(b[i])) << i;
          } else {
            ASSERT_EQ(float_bits(a[i]), float_bits(b[i])) << "inverse " << inverse << " trial " << trial << " elem " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hz::kernels
