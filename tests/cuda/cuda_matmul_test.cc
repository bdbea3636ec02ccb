// CUDA matmul and Q8_0 activation quantizer against the scalar references: quantized activations
// and integer block sums bit for bit, products within f32 rounding, and batch invariance (a
// token's outputs are bit-identical whatever else is in the launch). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "support/gpu_test.h"

namespace hz {
namespace {

using test::DeviceArray;

struct Shape {
  int64_t m, n, tokens;
};

// Weight rows of `t` from f32 rows (kernels::encode_row).
std::vector<uint8_t> make_weights(DType t, const std::vector<float>& w, int64_t m, int64_t n) {
  const uint64_t rb = row_bytes(t, n);
  std::vector<uint8_t> out(rb * m);
  for (int64_t r = 0; r < m; ++r) kernels::encode_row(t, w.data() + r * n, out.data() + r * rb, n);
  return out;
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

bool quantized(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_0; }

class CudaMatmulTest : public ::testing::TestWithParam<std::tuple<DType, cuda::MatmulKernel>> {};

TEST_P(CudaMatmulTest, MatchesReferenceAndIsBatchInvariant) {
  HZ_REQUIRE_GPU();
  const DType t = std::get<0>(GetParam());
  const cuda::MatmulKernel kernel = std::get<1>(GetParam());
  auto stream = device::Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  const device::Stream& s = *stream;
  std::mt19937 rng(1234 + static_cast<int>(t));
  // Tall matrices (m >= 8192) take two rows a warp in the streaming kernel.
  std::vector<Shape> shapes = {{1, 32, 1}, {7, 64, 1}, {33, 96, 5}, {130, 4096, 9}, {64, 2048, 17}, {8195, 2080, 3}, {40, 512, 45}};
  if (!quantized(t)) shapes.push_back({5, 37, 3});  // n not a multiple of anything
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(testing::Message() << dtype_name(t) << " m=" << sh.m << " n=" << sh.n << " tokens=" << sh.tokens);
    const std::vector<float> wf = random_floats(rng, sh.m * sh.n, 1.0f);
    std::vector<float> x = random_floats(rng, sh.tokens * sh.n, 2.0f);
    if (sh.n >= 64) x[3] = 0.0f, x[40] = -2.0f;  // a zero and an extreme in the first rows
    const std::vector<uint8_t> w = make_weights(t, wf, sh.m, sh.n);
    DeviceArray<uint8_t> dw(s, w);
    DeviceArray<float> dx(s, x);
    DeviceArray<float> dy(s, static_cast<size_t>(sh.m * sh.tokens));
    std::vector<float> ref(sh.m * sh.tokens);
    const int64_t nb = sh.n / kQK8_0;
    std::vector<BlockQ8_0> xq;
    std::unique_ptr<DeviceArray<BlockQ8_0>> dxq;
    const void* xin = dx.data();
    if (quantized(t)) {
      xq.resize(sh.tokens * nb);
      for (int64_t k = 0; k < sh.tokens; ++k) kernels::ref::quantize_row_q8_0(x.data() + k * sh.n, xq.data() + k * nb, sh.n);
      dxq = std::make_unique<DeviceArray<BlockQ8_0>>(s, xq.size());
      ASSERT_TRUE(cuda::quantize_q8_0(dx.data(), dxq->data(), sh.tokens, sh.n, s).ok());
      const std::vector<BlockQ8_0> got = dxq->read();
      ASSERT_EQ(0, std::memcmp(got.data(), xq.data(), xq.size() * sizeof(BlockQ8_0))) << "quantized activations differ";
      xin = dxq->data();
      kernels::ref::matmul(t, sh.n, w.data(), row_bytes(t, sh.n), 0, sh.m, xq.data(), nb * sizeof(BlockQ8_0), sh.tokens,
                           ref.data(), sh.m);
    } else {
      kernels::ref::matmul(t, sh.n, w.data(), row_bytes(t, sh.n), 0, sh.m, x.data(), sh.n * 4, sh.tokens, ref.data(), sh.m);
    }
    Status st = cuda::matmul(t, dw.data(), sh.m, sh.n, xin, sh.tokens, dy.data(), kernel, s);
    ASSERT_TRUE(st.ok()) << st.message();
    const std::vector<float> got = dy.read();
    for (int64_t k = 0; k < sh.tokens; ++k) {
      for (int64_t r = 0; r < sh.m; ++r) {
        const float g = got[k * sh.m + r], e = ref[k * sh.m + r];
        ASSERT_TRUE(std::isfinite(g)) << "unwritten or non-finite output at token " << k << " row " << r;
        // f32 sums in another order: a few ulp of the sum of magnitudes (<= n * 2 * 1 here).
        EXPECT_NEAR(g, e, 2e-6 * sh.n + 1e-6) << "token " << k << " row " << r;
      }
    }
    // Batch invariance: each token alone gives the same bits as inside the batch.
    for (int64_t k = 0; k < sh.tokens; ++k) {
      DeviceArray<float> one(s, static_cast<size_t>(sh.m));
      const void* xk = quantized(t) ? static_cast<const void*>(dxq->data() + k * nb)
                                    : static_cast<const void*>(dx.data() + k * sh.n);
      ASSERT_TRUE(cuda::matmul(t, dw.data(), sh.m, sh.n, xk, 1, one.data(), kernel, s).ok());
      const std::vector<float> alone = one.read();
      for (int64_t r = 0; r < sh.m; ++r) {
        ASSERT_EQ(test::float_bits(alone[r]), test::float_bits(got[k * sh.m + r])) << "token " << k << " row " << r;
      }
    }
    if (quantized(t)) {
      // Integer block sums, bit for bit with the reference's formula.
      DeviceArray<int32_t> sums(s, static_cast<size_t>(sh.tokens * sh.m * nb));
      ASSERT_TRUE(cuda::quant_block_sums(t, dw.data(), sh.m, sh.n, dxq->data(), sh.tokens, sums.data(), s).ok());
      const std::vector<int32_t> gs = sums.read();
      for (int64_t k = 0; k < sh.tokens; ++k) {
        for (int64_t r = 0; r < sh.m; ++r) {
          for (int64_t b = 0; b < nb; ++b) {
            const BlockQ8_0& xb = xq[k * nb + b];
            int32_t isum = 0;
            if (t == DType::kQ8_0) {
              const auto& wb = reinterpret_cast<const BlockQ8_0*>(w.data() + r * row_bytes(t, sh.n))[b];
              for (int j = 0; j < kQK8_0; ++j) isum += wb.qs[j] * xb.qs[j];
            } else {
              const auto& wb = reinterpret_cast<const BlockQ4_0*>(w.data() + r * row_bytes(t, sh.n))[b];
              for (int j = 0; j < kQK4_0 / 2; ++j) {
                isum += ((wb.qs[j] & 0x0f) - 8) * xb.qs[j];
                isum += ((wb.qs[j] >> 4) - 8) * xb.qs[j + kQK4_0 / 2];
              }
            }
            ASSERT_EQ(gs[(k * sh.m + r) * nb + b], isum) << "token " << k << " row " << r << " block " << b;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMatmulTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                                              DType::kQ4_0),
                                            ::testing::Values(cuda::MatmulKernel::kStreaming, cuda::MatmulKernel::kSimple)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) == cuda::MatmulKernel::kStreaming ? "_streaming" : "_simple");
                         });

TEST(CudaQuantizeTest, TiesAndZeroBlocksMatchReference) {
  HZ_REQUIRE_GPU();
  auto stream = device::Stream::create();
  ASSERT_TRUE(stream.ok());
  // Block 0: amax 127 so d = 1 and x * id = x: halves round away from zero. Block 1: all zero.
  // Block 2: tiny values (subnormal f16 scale).
  std::vector<float> x(96, 0.0f);
  for (int j = 0; j < 32; ++j) x[j] = (j % 2 ? -1.0f : 1.0f) * (0.5f + j);
  x[31] = 127.0f;
  for (int j = 0; j < 32; ++j) x[64 + j] = 1e-7f * (j - 16);
  std::vector<BlockQ8_0> ref(3);
  kernels::ref::quantize_row_q8_0(x.data(), ref.data(), 96);
  DeviceArray<float> dx(*stream, x);
  DeviceArray<BlockQ8_0> dy(*stream, ref.size());
  ASSERT_TRUE(cuda::quantize_q8_0(dx.data(), dy.data(), 1, 96, *stream).ok());
  const auto got = dy.read();
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), sizeof(BlockQ8_0) * ref.size()));
}

TEST(CudaMatmulArgsTest, BadArgumentsAreErrorsBeforeAnyLaunch) {
  // No GPU needed: the host checks answer first.
  device::Stream s;
  Status st = cuda::matmul(DType::kQ6_K, nullptr, 4, 256, nullptr, 1, nullptr, s);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("q6_K"), std::string::npos) << st.message();
  st = cuda::matmul(DType::kQ8_0, nullptr, 4, 48, nullptr, 1, nullptr, s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("48"), std::string::npos) << st.message();
  st = cuda::matmul(DType::kF16, nullptr, 0, 48, nullptr, 1, nullptr, s);
  EXPECT_FALSE(st.ok());
}

}  // namespace
}  // namespace hz
