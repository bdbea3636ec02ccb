// AVX2 kernels against the scalar references (tolerance on random inputs and edge cases) and the
// determinism contract: within the AVX2 ISA, matmul == vec_dot bit for bit whatever the number of
// tokens, the row range and the pointer alignment.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels {
namespace {

using test::float_bits;
using test::make_activations;
using test::make_weights;
using test::random_floats;

#define SKIP_WITHOUT_AVX2() \
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks avx2/fma/f16c"

bool is_block_type(DType t) { return traits(t).block_elems > 1; }

std::vector<int64_t> sizes_for(DType t) {
  if (traits(t).block_elems == 256) return {256, 512, 4096};
  if (traits(t).block_elems == 32) return {32, 64, 96, 4096};
  return {1, 7, 8, 9, 31, 33, 100, 257, 4096};
}

class Avx2DotTest : public ::testing::TestWithParam<DType> {};

TEST_P(Avx2DotTest, VecDotMatchesReferenceWithinTolerance) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  for (int64_t n : sizes_for(type)) {
    auto w = make_weights(type, 1, n, 100 + static_cast<uint32_t>(n));
    auto x = make_activations(type, 1, n, 200 + static_cast<uint32_t>(n));
    std::vector<float> wf(n), xf(n);
    ref::dequantize_row(type, w.data(), wf.data(), n);
    ref::dequantize_row(activation_type(type), x.data(), xf.data(), n);
    double mag = 0.0;
    for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
    float got, want;
    avx2::vec_dot(type, n, w.data(), x.data(), &got);
    ref::vec_dot(type, n, w.data(), x.data(), &want);
    EXPECT_NEAR(got, want, 2e-6 * mag + 1e-7) << dtype_name(type) << " n=" << n;
  }
}

// The contract the whole engine relies on: batching must never change a logit.
TEST_P(Avx2DotTest, MatmulIsBitIdenticalToVecDot) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  const int64_t rows = 11;
  for (int64_t n : sizes_for(type)) {
    if (n > 1024 && !is_block_type(type)) continue;  // keep the test fast; 4096 is covered above
    auto w = make_weights(type, rows, n, 300);
    auto x = make_activations(type, 9, n, 400);
    const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
    std::vector<float> expect(9 * rows);
    for (int64_t t = 0; t < 9; ++t) {
      for (int64_t r = 0; r < rows; ++r) avx2::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &expect[t * rows + r]);
    }
    const std::pair<int64_t, int64_t> ranges[] = {{0, rows}, {3, 10}, {5, 6}, {1, 8}};
    for (int64_t tokens = 1; tokens <= 9; ++tokens) {
      for (auto [rb, re] : ranges) {
        std::vector<float> y(tokens * rows, std::nanf(""));
        avx2::matmul(type, n, w.data(), wrb, rb, re, x.data(), xrb, tokens, y.data(), rows);
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = rb; r < re; ++r) {
            ASSERT_EQ(float_bits(y[t * rows + r]), float_bits(expect[t * rows + r]))
                << dtype_name(type) << " n=" << n << " tokens=" << tokens << " rows=[" << rb << "," << re << ") t=" << t
                << " r=" << r;
          }
        }
      }
    }
  }
}

TEST_P(Avx2DotTest, ResultDoesNotDependOnAlignment) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  const int64_t n = is_block_type(type) ? 2 * traits(type).block_elems : 37, rows = 5, tokens = 3;
  auto w = make_weights(type, rows, n, 500);
  auto x = make_activations(type, tokens, n, 600);
  const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
  std::vector<float> base(tokens * rows);
  avx2::matmul(type, n, w.data(), wrb, 0, rows, x.data(), xrb, tokens, base.data(), rows);
  for (int off = 1; off < 8; off += 3) {
    std::vector<uint8_t> w2(w.size() + off), x2(x.size() + off);
    std::memcpy(w2.data() + off, w.data(), w.size());
    std::memcpy(x2.data() + off, x.data(), x.size());
    std::vector<float> y(tokens * rows);
    avx2::matmul(type, n, w2.data() + off, wrb, 0, rows, x2.data() + off, xrb, tokens, y.data(), rows);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(float_bits(y[i]), float_bits(base[i])) << "offset " << off;
  }
}

TEST_P(Avx2DotTest, DispatchedEntryPointsFollowForcedIsa) {
  SKIP_WITHOUT_AVX2();
  const DType type = GetParam();
  const int64_t n = is_block_type(type) ? traits(type).block_elems * 2 : 45;
  auto w = make_weights(type, 1, n, 700);
  auto x = make_activations(type, 1, n, 800);
  const Isa before = active_isa();
  float a, s, ra, rs;
  force_isa(Isa::kAvx2);
  vec_dot(type, n, w.data(), x.data(), &a);
  force_isa(Isa::kScalar);
  vec_dot(type, n, w.data(), x.data(), &s);
  force_isa(before);
  avx2::vec_dot(type, n, w.data(), x.data(), &ra);
  ref::vec_dot(type, n, w.data(), x.data(), &rs);
  EXPECT_EQ(float_bits(a), float_bits(ra));
  EXPECT_EQ(float_bits(s), float_bits(rs));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Avx2DotTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Block quants with extreme activations: zeros, the full int8 range, a single huge value.
TEST(Avx2QuantDotTest, EdgeActivations) {
  SKIP_WITHOUT_AVX2();
  const int64_t n = 96;
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    auto w = make_weights(type, 1, n, 900);
    std::vector<std::vector<float>> inputs = {std::vector<float>(n, 0.0f), std::vector<float>(n, -3e4f),
                                              random_floats(n, 5, -1e6f, 1e6f), random_floats(n, 6, -1e30f, 1e30f)};
    inputs[1][5] = 3e4f;
    for (const auto& f : inputs) {
      std::vector<BlockQ8_0> x(n / 32);
      ref::quantize_row_q8_0(f.data(), x.data(), n);
      float got, want;
      avx2::vec_dot(type, n, w.data(), x.data(), &got);
      ref::vec_dot(type, n, w.data(), x.data(), &want);
      if (!std::isfinite(want)) {
        // A scale beyond f16's range is Inf (as in llama.cpp); where Inf * 0 lands differs.
        EXPECT_FALSE(std::isfinite(got));
      } else {
        EXPECT_NEAR(got, want, 1e-5f * std::fabs(want) + 1e-6f);
      }
    }
  }
}

TEST(Avx2QuantizeTest, Q8_0IsBitIdenticalToReference) {
  SKIP_WITHOUT_AVX2();
  std::vector<std::vector<float>> inputs = {random_floats(4096, 1), random_floats(64, 2, -1e-3f, 1e-3f),
                                            std::vector<float>(64, 0.0f), random_floats(64, 3, -6e4f, 6e4f)};
  std::vector<float> halves(64);
  for (int i = 0; i < 64; ++i) halves[i] = (i % 2 ? -1.0f : 1.0f) * (static_cast<float>(i % 40) + 0.5f);
  halves[0] = 127.0f;
  halves[32] = -127.0f;  // d = 1 in both blocks: every other value is an exact tie
  inputs.push_back(halves);
  for (const auto& x : inputs) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<BlockQ8_0> a(n / 32), b(n / 32);
    avx2::quantize_row_q8_0(x.data(), a.data(), n);
    ref::quantize_row_q8_0(x.data(), b.data(), n);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(BlockQ8_0)), 0) << "n=" << n;
  }
}

TEST(Avx2QuantizeTest, Q8_KIsBitIdenticalToReference) {
  SKIP_WITHOUT_AVX2();
  std::vector<std::vector<float>> inputs = {random_floats(1024, 4), std::vector<float>(256, 0.0f),
                                            random_floats(256, 5, -1e20f, 1e20f)};
  std::vector<float> ties(256);
  for (int i = 0; i < 256; ++i) ties[i] = static_cast<float>(i % 50) - 24.5f;
  ties[7] = -127.0f;
  ties[9] = 127.0f;  // same magnitude, later: the first one (negative) sets the sign
  inputs.push_back(ties);
  for (const auto& x : inputs) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<BlockQ8_K> a(n / 256), b(n / 256);
    avx2::quantize_row_q8_k(x.data(), a.data(), n);
    ref::quantize_row_q8_k(x.data(), b.data(), n);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(BlockQ8_K)), 0) << "n=" << n;
  }
}

TEST(Avx2ConvertTest, HalfAndBFloatRowsAreBitIdenticalToReference) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(7);
  for (int64_t n : {1, 7, 8, 13, 1000}) {
    std::vector<uint16_t> h(n);
    for (auto& v : h) {
      v = static_cast<uint16_t>(rng());
      if ((v & 0x7c00) == 0x7c00 && (v & 0x3ff)) v &= 0xfc00;  // f16 NaN payloads are not compared
    }
    std::vector<float> a(n), b(n);
    avx2::f16_to_f32_row(h.data(), a.data(), n);
    ref::f16_to_f32_row(h.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(float_bits(a[i]), float_bits(b[i])) << h[i];
    avx2::bf16_to_f32_row(h.data(), a.data(), n);
    ref::bf16_to_f32_row(h.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(float_bits(a[i]), float_bits(b[i]));

    std::vector<float> f(n);
    for (auto& v : f) v = f32_from_bits(static_cast<uint32_t>(rng()) & 0xbfffffffu);  // no f32 NaN/Inf
    f[0] = 65520.0f;  // rounds to f16 inf
    if (n > 1) f[1] = 5.96e-8f;  // f16 subnormal
    if (n > 2) f[2] = std::nanf("");
    std::vector<uint16_t> x(n), y(n);
    avx2::f32_to_bf16_row(f.data(), x.data(), n);
    ref::f32_to_bf16_row(f.data(), y.data(), n);
    EXPECT_EQ(x, y);
    if (n > 2) f[2] = -0.0f;
    for (int64_t i = 3; i < n; ++i) f[i] = random_floats(1, static_cast<uint32_t>(i), -7e4f, 7e4f)[0];
    avx2::f32_to_f16_row(f.data(), x.data(), n);
    ref::f32_to_f16_row(f.data(), y.data(), n);
    EXPECT_EQ(x, y);
  }
}

// add and scale round exactly as the reference; the axpys fuse the multiply-add (one rounding).
TEST(Avx2ElementwiseTest, ElementwiseOpsMatchReference) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : {1, 5, 8, 19, 256}) {
    auto x = random_floats(n, 10), y0 = random_floats(n, 11);
    std::vector<uint16_t> h(n);
    ref::f32_to_f16_row(x.data(), h.data(), n);
    auto a = y0, b = y0;
    avx2::add(a.data(), x.data(), n);
    ref::add(b.data(), x.data(), n);
    EXPECT_EQ(a, b);
    auto c = y0, d = y0;
    avx2::axpy(c.data(), 0.37f, x.data(), n);
    ref::axpy(d.data(), 0.37f, x.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(c[i], d[i], 1e-6f * (std::fabs(y0[i]) + 0.37f * std::fabs(x[i])));
    c = y0, d = y0;
    avx2::axpy_f16(c.data(), -1.3f, h.data(), n);
    ref::axpy_f16(d.data(), -1.3f, h.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(c[i], d[i], 1e-6f * (std::fabs(y0[i]) + 1.3f * std::fabs(x[i])));
    avx2::scale(a.data(), 3.1f, n);
    ref::scale(b.data(), 3.1f, n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(float_bits(a[i]), float_bits(b[i])) << n << " " << i;
  }
}

TEST(Avx2ElementwiseTest, DotsMatchReferenceWithinTolerance) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : {1, 7, 8, 31, 33, 64, 100, 4096}) {
    auto a = random_floats(n, 20), b = random_floats(n, 21);
    std::vector<uint16_t> h(n);
    ref::f32_to_f16_row(b.data(), h.data(), n);
    double mag = 0.0;
    for (int64_t i = 0; i < n; ++i) mag += std::fabs(a[i] * b[i]);
    EXPECT_NEAR(avx2::dot_f32(a.data(), b.data(), n), ref::dot_f32(a.data(), b.data(), n), 2e-6 * mag) << n;
    EXPECT_NEAR(avx2::dot_f32_f16(a.data(), h.data(), n), ref::dot_f32_f16(a.data(), h.data(), n), 2e-6 * mag) << n;
  }
}

TEST(Avx2ElementwiseTest, RmsNormMatchesReference) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : {1, 7, 64, 100, 4096}) {
    for (float range : {1.0f, 1e-20f, 1e15f}) {
      auto x = random_floats(n, 30, -range, range), w = random_floats(n, 31);
      std::vector<float> a(n), b(n);
      for (const float* wp : {static_cast<const float*>(nullptr), static_cast<const float*>(w.data())}) {
        avx2::rms_norm(x.data(), wp, a.data(), n, 1e-5f);
        ref::rms_norm(x.data(), wp, b.data(), n, 1e-5f);
        for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * std::fabs(b[i]) + 1e-7f) << n << " " << range;
      }
    }
  }
  std::vector<float> x = {1.0f, std::nanf(""), 2.0f}, y(3);
  avx2::rms_norm(x.data(), nullptr, y.data(), 3, 1e-5f);
  EXPECT_TRUE(std::isnan(y[0]));
  std::vector<float> z(9, 0.0f), yz(9);
  avx2::rms_norm(z.data(), nullptr, yz.data(), 9, 1e-6f);
  for (float v : yz) EXPECT_EQ(v, 0.0f);
}

TEST(Avx2ElementwiseTest, SoftmaxMatchesReferenceAndMasks) {
  SKIP_WITHOUT_AVX2();
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 3, 8, 13, 100, 4096}) {
    for (float range : {1.0f, 30.0f, 1e30f}) {
      auto x = random_floats(n, 40, -range, range);
      for (int64_t i = 0; i < n; i += 3) x[i] = ninf;
      x[n - 1] = range;  // at least one finite entry
      auto a = x, b = x;
      avx2::softmax(a.data(), n);
      ref::softmax(b.data(), n);
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(a[i], b[i], 2e-6f * b[i] + 1e-7f) << n << " " << range << " " << i;
        if (x[i] == ninf) {
          EXPECT_EQ(a[i], 0.0f);
        }
        sum += a[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
  std::vector<float> all(11, ninf);
  avx2::softmax(all.data(), 11);
  for (float v : all) EXPECT_EQ(v, 0.0f);
}

TEST(Avx2ElementwiseTest, SwigluMatchesReference) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : {1, 9, 64, 1000}) {
    auto g = random_floats(n, 50, -20.0f, 20.0f), u = random_floats(n, 51);
    const float special[] = {0.0f, -0.0f, 88.0f, -88.0f, 100.0f, -100.0f, 1e30f, -1e30f, 89.0f};
    for (int64_t i = 0; i < n && i < 9; ++i) g[i] = special[i];
    auto a = g, b = g;
    avx2::swiglu(a.data(), u.data(), n);
    ref::swiglu(b.data(), u.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 4e-7f * std::fabs(b[i]) + 1e-30f) << g[i];
  }
}

}  // namespace
}  // namespace hz::kernels

namespace hz::kernels {
namespace {

// The AVX2 build of XXH3 gives the library's values: every length class of the algorithm (0,
// 1-3, 4-8, 9-16, 17-128, 129-240, and the long path with partial stripes and blocks), seeds,
// unaligned starts.
TEST(Avx2ChecksumTest, MatchesTheLibrary) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks avx2/fma/f16c";
  std::mt19937 rng(3);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : {0, 1, 3, 4, 8, 9, 16, 17, 100, 128, 129, 240, 241, 1023, 1024, 2048, 4099, 65536, 69999}) {
    for (size_t off : {0, 1, 7}) {
      if (off + n > buf.size()) continue;
      for (uint64_t seed : {uint64_t{0}, uint64_t{0x9e3779b97f4a7c15ull}}) {
        EXPECT_EQ(avx2::checksum64(buf.data() + off, n, seed), ref::checksum64(buf.data() + off, n, seed))
            << "n " << n << " off " << off << " seed " << seed;
      }
    }
  }
  // And it is a checksum: one flipped bit changes it.
  const uint64_t a = avx2::checksum64(buf.data(), 4096, 0);
  buf[1000] ^= 0x10;
  EXPECT_NE(avx2::checksum64(buf.data(), 4096, 0), a);
}

}  // namespace
}  // namespace hz::kernels
