// CUDA RMSNorm, RoPE (every scaling the CPU has), SwiGLU, residual add and embedding lookup against
// their CPU references. Skips without a GPU.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "model/rope.h"
#include "model/rope_scaling.h"
#include "support/gpu_test.h"
#include "support/hadamard_checks.h"

namespace hz {
namespace {

using test::DeviceArray;
using test::float_bits;

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

class CudaElementwiseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HZ_REQUIRE_GPU();
    auto s = device::Stream::create();
    ASSERT_TRUE(s.ok()) << s.status().message();
    stream_ = std::move(*s);
  }
  device::Stream stream_;
  std::mt19937 rng_{77};
};

TEST_F(CudaElementwiseTest, RmsNormMatchesReference) {
  for (int64_t n : {1, 7, 64, 255, 4096, 5000}) {
    for (bool weighted : {true, false}) {
      const int64_t rows = 3;
      std::vector<float> x = random_floats(rng_, rows * n, 3.0f), w = random_floats(rng_, n, 1.5f);
      std::vector<float> ref(rows * n);
      for (int64_t r = 0; r < rows; ++r) kernels::ref::rms_norm(x.data() + r * n, weighted ? w.data() : nullptr, ref.data() + r * n, n, 1e-5f);
      DeviceArray<float> dx(stream_, x), dw(stream_, w), dy(stream_, static_cast<size_t>(rows * n));
      ASSERT_TRUE(cuda::rms_norm(dx.data(), weighted ? dw.data() : nullptr, dy.data(), rows, n, 1e-5f, stream_).ok());
      const auto got = dy.read();
      for (int64_t i = 0; i < rows * n; ++i) {
        // The double sum is reduced in another order; the float steps after it are the reference's.
        ASSERT_NEAR(got[i], ref[i], 2e-6f * std::fabs(ref[i]) + 1e-30f) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST_F(CudaElementwiseTest, SwigluAndAddMatchReference) {
  const int64_t n = 10007;
  std::vector<float> g = random_floats(rng_, n, 12.0f), u = random_floats(rng_, n, 3.0f);
  g[0] = 0.0f;
  g[1] = -100.0f;  // exp overflow side: silu -> -0
  g[2] = 100.0f;
  std::vector<float> ref = g;
  kernels::ref::swiglu(ref.data(), u.data(), n);
  DeviceArray<float> dg(stream_, g), du(stream_, u);
  ASSERT_TRUE(cuda::swiglu(dg.data(), du.data(), n, stream_).ok());
  auto got = dg.read();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], ref[i], 6e-7f * std::fabs(ref[i]) + 1e-30f) << i;

  std::vector<float> y = random_floats(rng_, n, 5.0f), x = random_floats(rng_, n, 5.0f);
  std::vector<float> sum = y;
  kernels::ref::add(sum.data(), x.data(), n);
  DeviceArray<float> dy(stream_, y), dx(stream_, x);
  ASSERT_TRUE(cuda::add(dy.data(), dx.data(), n, stream_).ok());
  got = dy.read();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(got[i]), float_bits(sum[i])) << i;
}

// Bias rows: y[r] += b for every row, as kernels::ref::add row by row.
TEST_F(CudaElementwiseTest, AddRowsMatchesReference) {
  const int64_t rows = 37, n = 1031;
  std::vector<float> y = random_floats(rng_, rows * n, 5.0f), b = random_floats(rng_, n, 5.0f);
  b[3] = std::numeric_limits<float>::infinity();
  std::vector<float> want = y;
  for (int64_t r = 0; r < rows; ++r) kernels::ref::add(want.data() + r * n, b.data(), n);
  DeviceArray<float> dy(stream_, y), db(stream_, b);
  ASSERT_TRUE(cuda::add_rows(dy.data(), db.data(), rows, n, stream_).ok());
  const auto got = dy.read();
  for (int64_t i = 0; i < rows * n; ++i) ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << i;
}

// RoPE: hz::Rope folds every scaling into its per-pair frequencies; the kernel takes them (angle at
// position 1) and must rotate as Rope::apply does, for both pair layouts and far positions.
TEST_F(CudaElementwiseTest, RopeMatchesReferenceForEveryScaling) {
  struct Case {
    RopeScaling scaling;
    RopeLayout layout;
    int32_t head_dim, rot_dim;
  };
  const std::vector<Case> cases = {
      {RopeScaling::kNone, RopeLayout::kNormal, 64, 64},   {RopeScaling::kNone, RopeLayout::kNeox, 128, 128},
      {RopeScaling::kLinear, RopeLayout::kNormal, 64, 32}, {RopeScaling::kNtk, RopeLayout::kNeox, 128, 128},
      {RopeScaling::kYarn, RopeLayout::kNeox, 128, 64},    {RopeScaling::kLlama3, RopeLayout::kNormal, 128, 128},
      {RopeScaling::kNone, RopeLayout::kNeox, 8, 8},       {RopeScaling::kYarn, RopeLayout::kNormal, 256, 256},
  };
  const std::vector<int64_t> positions = {0, 1, 17, 4095, 131071, 1048575};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << rope_scaling_name(c.scaling) << " head_dim=" << c.head_dim << " rot=" << c.rot_dim);
    RopeConfig cfg;
    cfg.layout = c.layout;
    cfg.dim = c.rot_dim;
    cfg.freq_base = 500000.0f;
    cfg.scaling = c.scaling;
    cfg.freq_scale = c.scaling == RopeScaling::kNone ? 1.0f : 0.125f;
    cfg.orig_ctx = 8192;
    if (c.scaling == RopeScaling::kYarn) cfg.ext_factor = 1.0f;
    if (c.scaling == RopeScaling::kLlama3)
      cfg.freq_factors = llama3_freq_factors(c.rot_dim, cfg.freq_base, 8.0f, 1.0f, 4.0f, 8192);
    const Rope rope(cfg, c.head_dim);
    std::vector<float> theta(c.rot_dim / 2);
    for (int32_t i = 0; i < c.rot_dim / 2; ++i) theta[i] = rope.angle(1, i);
    const int32_t heads = 3;
    const int64_t tokens = static_cast<int64_t>(positions.size());
    std::vector<float> x = random_floats(rng_, tokens * heads * c.head_dim, 2.0f), ref = x;
    for (int64_t t = 0; t < tokens; ++t) rope.apply(ref.data() + t * heads * c.head_dim, heads, positions[t]);
    DeviceArray<float> dx(stream_, x), dth(stream_, theta);
    DeviceArray<int64_t> dpos(stream_, positions);
    ASSERT_TRUE(cuda::rope(dx.data(), tokens, heads, c.head_dim, dpos.data(), dth.data(), c.rot_dim, rope.mscale(),
                           c.layout == RopeLayout::kNeox, stream_).ok());
    const auto got = dx.read();
    for (size_t i = 0; i < got.size(); ++i) {
      // Same angles (one f32 product); sin/cos within a few ulp of the host's.
      ASSERT_NEAR(got[i], ref[i], 2e-6f) << "element " << i;
    }
  }
}

TEST_F(CudaElementwiseTest, EmbeddingMatchesDequantizeBitForBit) {
  const int64_t vocab = 50, dim = 96;
  const std::vector<float> table = random_floats(rng_, vocab * dim, 1.0f);
  const std::vector<int32_t> tokens = {0, 49, 7, 7, 50, -1, 23};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(dtype_name(t));
    const uint64_t rb = row_bytes(t, dim);
    std::vector<uint8_t> bytes(rb * vocab);
    for (int64_t r = 0; r < vocab; ++r) {
      const float* src = table.data() + r * dim;
      uint8_t* dst = bytes.data() + r * rb;
      if (t == DType::kF32) std::memcpy(dst, src, dim * 4);
      if (t == DType::kF16) kernels::ref::f32_to_f16_row(src, reinterpret_cast<uint16_t*>(dst), dim);
      if (t == DType::kBF16) kernels::ref::f32_to_bf16_row(src, reinterpret_cast<uint16_t*>(dst), dim);
      if (t == DType::kQ8_0) kernels::ref::quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), dim);
      if (t == DType::kQ4_0) kernels::ref::quantize_row_q4_0(src, reinterpret_cast<BlockQ4_0*>(dst), dim);
    }
    DeviceArray<uint8_t> dt(stream_, bytes);
    DeviceArray<int32_t> dtok(stream_, tokens);
    DeviceArray<float> dy(stream_, tokens.size() * dim);
    ASSERT_TRUE(cuda::embedding(t, dt.data(), vocab, dim, dtok.data(), static_cast<int64_t>(tokens.size()), dy.data(), stream_).ok());
    const auto got = dy.read();
    std::vector<float> row(dim);
    for (size_t k = 0; k < tokens.size(); ++k) {
      const bool valid = tokens[k] >= 0 && tokens[k] < vocab;
      if (valid) kernels::ref::dequantize_row(t, bytes.data() + tokens[k] * rb, row.data(), dim);
      for (int64_t i = 0; i < dim; ++i) {
        if (valid) {
          ASSERT_EQ(float_bits(got[k * dim + i]), float_bits(row[i])) << "token " << tokens[k] << " dim " << i;
        } else {
          ASSERT_TRUE(std::isnan(got[k * dim + i])) << "out-of-range token " << tokens[k] << " must give NaN";
        }
      }
    }
  }
}

// The KV rotation of q/k/v heads, bit for bit with the scalar reference (tests/support/hadamard_checks.h).
TEST(CudaHadamardHeadsTest, MatchesTheReferenceBitForBit) {
  HZ_REQUIRE_GPU();
  auto be = cuda::make_cuda_backend("GPU test");
  ASSERT_TRUE(be.ok()) << be.status().message();
  test::check_hadamard_heads(**be);
}

TEST(CudaElementwiseArgsTest, BadShapesAreErrorsNamingTheArgument) {
  device::Stream s;
  Status st = cuda::rope(nullptr, 1, 2, 64, nullptr, nullptr, 65, 1.0f, false, s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rot_dim"), std::string::npos) << st.message();
  st = cuda::rms_norm(nullptr, nullptr, nullptr, 0, 10, 1e-5f, s);
  EXPECT_NE(st.message().find("rows"), std::string::npos) << st.message();
  st = cuda::embedding(DType::kQ8_0, nullptr, 10, 40, nullptr, 1, nullptr, s);
  EXPECT_NE(st.message().find("multiple of 32"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hz
