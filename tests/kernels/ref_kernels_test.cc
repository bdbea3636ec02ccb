// Scalar reference kernels against hand-computed values (quantizer rounding, block layouts,
// softmax/rms_norm edge cases) and against each other (matmul vs vec_dot, dot vs dequantize).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"

namespace hz::kernels {
namespace {

using test::make_activations;
using test::make_weights;
using test::random_floats;

TEST(RefConvertTest, HalfTableMatchesConversionForEveryValue) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> y(65536);
  ref::f16_to_f32_row(all.data(), y.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(test::float_bits(y[h]), test::float_bits(f16_to_f32(all[h]))) << h;
  EXPECT_EQ(y[0x3c00], 1.0f);
  EXPECT_EQ(y[0x0001], 5.9604645e-8f);  // smallest subnormal
}

TEST(RefQuantizeTest, Q8_0RoundsHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax 127 -> d = 1, id = 1: q = round(x)
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = 1.49f;
  x[6] = -126.6f;
  BlockQ8_0 b;
  ref::quantize_row_q8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // f16 1.0
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 1);
  EXPECT_EQ(b.qs[4], -1);
  EXPECT_EQ(b.qs[5], 1);
  EXPECT_EQ(b.qs[6], -127);
  EXPECT_EQ(b.qs[7], 0);
}

TEST(RefQuantizeTest, Q8_0AllZerosGivesZeroScale) {
  std::vector<float> x(64, 0.0f);
  BlockQ8_0 b[2];
  ref::quantize_row_q8_0(x.data(), b, 64);
  EXPECT_EQ(b[1].d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b[1].qs[j], 0);
}

TEST(RefQuantizeTest, Q4_0UsesSignedMaxAndClamps) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // largest magnitude, negative: d = -8 / -8 = 1
  x[1] = 7.6f;   // 16.1 -> 16 -> clamped to 15
  x[2] = 0.5f;   // 9.0 -> 9
  x[3] = -0.5f;  // 8.0 -> 8
  x[16] = 8.0f;  // tie with |-8|: first one wins, so this is 16.5 -> 15
  x[17] = 3.4f;  // 11.9 -> 11
  BlockQ4_0 b;
  ref::quantize_row_q4_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0] & 0xf, 0);
  EXPECT_EQ(b.qs[1] & 0xf, 15);
  EXPECT_EQ(b.qs[2] & 0xf, 9);
  EXPECT_EQ(b.qs[3] & 0xf, 8);
  EXPECT_EQ(b.qs[4] & 0xf, 8);  // zero -> 8
  EXPECT_EQ(b.qs[0] >> 4, 15);
  EXPECT_EQ(b.qs[1] >> 4, 11);

  x[0] = 8.0f;  // positive max: d = -1
  ref::quantize_row_q4_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0xbc00);       // f16 -1.0
  EXPECT_EQ(b.qs[0] & 0xf, 0);  // -8 + 8.5 = 0.5 -> 0
  EXPECT_EQ(b.qs[2] & 0xf, 8);  // -0.5 + 8.5 = 8
}

TEST(RefQuantizeTest, Q8_KRoundsHalfToEvenAndSumsGroups) {
  std::vector<float> x(256, 0.0f);
  x[0] = 127.0f;  // max positive: iscale = -1, d = -1
  x[1] = 2.5f;    // -2.5 -> -2
  x[2] = 3.5f;    // -3.5 -> -4
  x[17] = -127.0f;
  BlockQ8_K b;
  ref::quantize_row_q8_k(x.data(), &b, 256);
  EXPECT_EQ(b.d, -1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], -2);
  EXPECT_EQ(b.qs[2], -4);
  EXPECT_EQ(b.qs[17], 127);
  EXPECT_EQ(b.bsums[0], -133);
  EXPECT_EQ(b.bsums[1], 127);
  EXPECT_EQ(b.bsums[2], 0);
}

TEST(RefQuantizeTest, DequantizeInvertsQuantizeWithinHalfStep) {
  auto x = random_floats(96, 3);
  std::vector<BlockQ8_0> q8(3);
  std::vector<BlockQ4_0> q4(3);
  ref::quantize_row_q8_0(x.data(), q8.data(), 96);
  ref::quantize_row_q4_0(x.data(), q4.data(), 96);
  std::vector<float> y8(96), y4(96);
  ref::dequantize_row(DType::kQ8_0, q8.data(), y8.data(), 96);
  ref::dequantize_row(DType::kQ4_0, q4.data(), y4.data(), 96);
  for (int i = 0; i < 96; ++i) {
    const float d8 = f16_to_f32(q8[i / 32].d), d4 = std::fabs(f16_to_f32(q4[i / 32].d));
    EXPECT_LE(std::fabs(y8[i] - x[i]), 0.5f * d8 * 1.01f) << i;
    EXPECT_LE(std::fabs(y4[i] - x[i]), 1.0f * d4 * 1.01f) << i;  // clamp at 15 can cost a full step
  }
}

// Packs 8 (scale, min) pairs of 6 bits into Q4_K/Q5_K's 12 bytes (the inverse of the layout).
void pack_scale_min(const int* sc, const int* m, uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

TEST(RefKQuantTest, ScaleMinUnpacksWhatWasPacked) {
  const int sc[8] = {1, 63, 17, 40, 5, 63, 33, 48};
  const int m[8] = {0, 2, 62, 31, 63, 16, 1, 47};
  uint8_t packed[12];
  pack_scale_min(sc, m, packed);
  for (int j = 0; j < 8; ++j) {
    uint8_t s, mm;
    ref::k_scale_min(j, packed, &s, &mm);
    EXPECT_EQ(s, sc[j]) << j;
    EXPECT_EQ(mm, m[j]) << j;
  }
}

TEST(RefKQuantTest, Q4_KDequantizesHandBuiltBlock) {
  BlockQ4_K b{};
  b.d = 0x3c00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  const int sc[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int m[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  pack_scale_min(sc, m, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | (((i * 7) % 16) << 4));
  std::vector<float> y(256);
  ref::dequantize_row(DType::kQ4_K, &b, y.data(), 256);
  // Element e: 64-element chunk c = e / 64; first 32 from low nibbles of qs[c*32 + l], next 32 high.
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, l = e % 64, g = e / 32;
    const uint8_t byte = b.qs[c * 32 + (l % 32)];
    const int q = l < 32 ? (byte & 15) : (byte >> 4);
    EXPECT_EQ(y[e], 1.0f * sc[g] * q - 0.5f * m[g]) << e;
  }
  EXPECT_EQ(y[0], 1.0f * 0 - 4.0f);          // q 0, scale 1, min 8*0.5
  EXPECT_EQ(y[33], 2.0f * 7 - 3.5f);         // high nibble of qs[1] = 7, group 1
}

TEST(RefKQuantTest, Q5_KTakesFifthBitFromQh) {
  BlockQ5_K b{};
  b.d = 0x3c00;
  b.dmin = 0;
  const int sc[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const int m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  pack_scale_min(sc, m, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = 0x53;  // low 3, high 5
  b.qh[4] = 0x81;                                // bit 0: element 4 (+16); bit 7: element 7*32+4
  std::vector<float> y(256);
  ref::dequantize_row(DType::kQ5_K, &b, y.data(), 256);
  EXPECT_EQ(y[4], 19.0f);
  EXPECT_EQ(y[5], 3.0f);
  EXPECT_EQ(y[36], 5.0f);
  EXPECT_EQ(y[7 * 32 + 4], 21.0f);
  EXPECT_EQ(y[6 * 32 + 4], 3.0f);
}

TEST(RefKQuantTest, Q6_KDequantizesHandBuiltBlock) {
  BlockQ6_K b{};
  b.d = 0x4000;  // 2.0
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  b.ql[0] = 0x21;   // element 0 low 1, element 64 low 2
  b.ql[32] = 0x43;  // element 32 low 3, element 96 low 4
  b.qh[0] = 0xe4;   // 2-bit highs: e0 -> 0, e32 -> 1, e64 -> 2, e96 -> 3
  b.ql[64] = 0x0f;  // second half: element 128 low 15
  b.qh[32] = 0x03;  // element 128 high 3
  std::vector<float> y(256);
  ref::dequantize_row(DType::kQ6_K, &b, y.data(), 256);
  EXPECT_EQ(y[0], 2.0f * -8 * (1 - 32));
  EXPECT_EQ(y[32], 2.0f * -6 * (3 + 16 - 32));
  EXPECT_EQ(y[64], 2.0f * -4 * (2 + 32 - 32));
  EXPECT_EQ(y[96], 2.0f * -2 * (4 + 48 - 32));
  EXPECT_EQ(y[128], 2.0f * 0 * (15 + 48 - 32));
  EXPECT_EQ(y[1], 2.0f * -8 * -32);
  EXPECT_EQ(y[255], 2.0f * 7 * -32);
}

class RefDotTest : public ::testing::TestWithParam<DType> {};

// vec_dot agrees with the f32 dot of the dequantized operands (the integer sums are exact).
TEST_P(RefDotTest, VecDotMatchesDequantizedDot) {
  const DType type = GetParam();
  const int64_t n = 512;
  auto w = make_weights(type, 1, n, 11);
  auto x = make_activations(type, 1, n, 12);
  std::vector<float> wf(n), xf(n);
  ref::dequantize_row(type, w.data(), wf.data(), n);
  ref::dequantize_row(activation_type(type), x.data(), xf.data(), n);
  double expect = 0.0, mag = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    expect += static_cast<double>(wf[i]) * xf[i];
    mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
  }
  float got;
  ref::vec_dot(type, n, w.data(), x.data(), &got);
  EXPECT_NEAR(got, expect, 1e-5 * mag + 1e-6);
}

TEST_P(RefDotTest, MatmulEqualsVecDot) {
  const DType type = GetParam();
  const int64_t n = 256, rows = 7, tokens = 3;
  auto w = make_weights(type, rows, n, 21);
  auto x = make_activations(type, tokens, n, 22);
  const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
  std::vector<float> y(tokens * rows, -1.0f);
  ref::matmul(type, n, w.data(), wrb, 2, 6, x.data(), xrb, tokens, y.data(), rows);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      if (r < 2 || r >= 6) {
        EXPECT_EQ(y[t * rows + r], -1.0f);  // outside [row_begin, row_end): untouched
        continue;
      }
      float d;
      ref::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &d);
      EXPECT_EQ(test::float_bits(y[t * rows + r]), test::float_bits(d)) << t << " " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RefDotTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(RefElementwiseTest, SoftmaxMasksNegativeInfinity) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> x = {1.0f, ninf, 1.0f, ninf};
  ref::softmax(x.data(), 4);
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_FLOAT_EQ(x[2], 0.5f);
  std::vector<float> all = {ninf, ninf};
  ref::softmax(all.data(), 2);
  EXPECT_EQ(all[0], 0.0f);
  std::vector<float> big = {1000.0f, 0.0f};
  ref::softmax(big.data(), 2);
  EXPECT_EQ(big[0], 1.0f);
  EXPECT_EQ(big[1], 0.0f);
}

TEST(RefElementwiseTest, RmsNormScalesToUnitRms) {
  std::vector<float> x = {3.0f, -4.0f, 0.0f, 0.0f}, w = {1.0f, 2.0f, 1.0f, 1.0f}, y(4);
  ref::rms_norm(x.data(), w.data(), y.data(), 4, 0.0f);  // rms = sqrt(25/4) = 2.5
  EXPECT_FLOAT_EQ(y[0], 1.2f);
  EXPECT_FLOAT_EQ(y[1], -3.2f);
  ref::rms_norm(x.data(), nullptr, y.data(), 4, 0.0f);
  EXPECT_FLOAT_EQ(y[1], -1.6f);
}

TEST(RefElementwiseTest, SwigluAndAxpys) {
  std::vector<float> g = {0.0f, 1.0f, -100.0f}, u = {5.0f, 2.0f, 3.0f};
  ref::swiglu(g.data(), u.data(), 3);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_FLOAT_EQ(g[1], 2.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_NEAR(g[2], 0.0f, 1e-30f);
  std::vector<float> y = {1.0f, 2.0f};
  const std::vector<uint16_t> h = {f32_to_f16(0.5f), f32_to_f16(-2.0f)};
  ref::axpy_f16(y.data(), 2.0f, h.data(), 2);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[1], -2.0f);
  const std::vector<float> a = {4.0f, 1.0f};
  EXPECT_EQ(ref::dot_f32_f16(a.data(), h.data(), 2), 0.0f);
}

TEST(DispatchTest, ForceScalarAndActivationTypes) {
  const Isa before = active_isa();
  force_isa(Isa::kScalar);
  EXPECT_EQ(active_isa(), Isa::kScalar);
  EXPECT_STREQ(isa_name(active_isa()), "scalar");
  force_isa(before);
  EXPECT_EQ(activation_type(DType::kQ4_0), DType::kQ8_0);
  EXPECT_EQ(activation_type(DType::kBF16), DType::kF32);
  EXPECT_EQ(activation_type(DType::kQ6_K), DType::kQ8_K);
  EXPECT_EQ(activation_row_bytes(DType::kQ4_0, 64), 68u);
  EXPECT_EQ(activation_row_bytes(DType::kQ5_K, 512), 584u);
}

}  // namespace
}  // namespace hz::kernels
