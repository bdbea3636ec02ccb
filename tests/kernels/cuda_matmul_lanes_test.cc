// The streaming CUDA matmul's lane arithmetic (kernels/cuda/matmul_lanes.h), run on the host: 32
// lanes' partial sums and the warp's xor tree for every row and token, against the scalar reference
// matmul, and bit-identical whatever the rows per warp, the tokens of a launch and the load width.
// This is the kernel's indexing and order; the GPU test (tests/cuda/cuda_matmul_test.cc) runs the
// same code as a kernel.
#include "kernels/cuda/matmul_lanes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace hz {
namespace {

std::vector<uint8_t> make_weights(DType t, const std::vector<float>& w, int64_t m, int64_t n) {
  const uint64_t rb = row_bytes(t, n);
  std::vector<uint8_t> out(rb * m);
  for (int64_t r = 0; r < m; ++r) kernels::encode_row(t, w.data() + r * n, out.data() + r * rb, n);
  return out;
}

// y[t][r] as the kernel computes it: warps of R rows over token tiles of kT, 32 lanes, the xor tree.
template <DType W, int R, int kT = 8>
std::vector<float> run_lanes(const uint8_t* w, int64_t m, int64_t n, const void* x, int64_t tokens, bool vec) {
  const uint64_t rb = row_bytes(W, n);
  std::vector<float> y(m * tokens, std::nanf(""));
  for (int64_t t0 = 0; t0 < tokens; t0 += kT) {
    const int nt = static_cast<int>(std::min<int64_t>(kT, tokens - t0));
    for (int64_t r0 = 0; r0 < m; r0 += R) {
      const uint8_t* wrow[R];
      for (int i = 0; i < R; ++i) wrow[i] = w + (r0 + i < m ? r0 + i : r0) * rb;
      float acc[32][R][kT];
      for (int lane = 0; lane < 32; ++lane) {
        cuda::lanes::lane_partials<W, R, kT>(wrow, n, x, t0, nt, vec, lane, acc[lane]);
      }
      for (int i = 0; i < R && r0 + i < m; ++i) {
        for (int k = 0; k < nt; ++k) {
          float v[32];
          for (int lane = 0; lane < 32; ++lane) v[lane] = acc[lane][i][k];
          y[(t0 + k) * m + r0 + i] = cuda::lanes::host_lane_sum(v);
        }
      }
    }
  }
  return y;
}

template <DType W>
void check_type(uint32_t seed) {
  constexpr bool kQuant = W == DType::kQ8_0 || W == DType::kQ4_0;
  struct Shape {
    int64_t m, n, tokens;
  };
  std::vector<Shape> shapes = {{1, 32, 1}, {7, 64, 3}, {5, 96, 9}, {3, 4096, 2}, {9, 2080, 17}, {2, 256, 8}, {3, 128, 40}};
  if (!kQuant) {
    shapes.push_back({5, 37, 3});   // no whole group: element by element
    shapes.push_back({3, 300, 4});  // a partial last group
  }
  std::mt19937 rng(seed);
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(testing::Message() << dtype_name(W) << " m=" << sh.m << " n=" << sh.n << " tokens=" << sh.tokens);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> wf(sh.m * sh.n), x(sh.tokens * sh.n);
    for (auto& v : wf) v = u(rng);
    for (auto& v : x) v = 2.0f * u(rng);
    if (sh.n >= 64) x[3] = 0.0f, x[40] = -2.0f;
    const std::vector<uint8_t> w = make_weights(W, wf, sh.m, sh.n);
    const uint64_t rb = row_bytes(W, sh.n);
    const int64_t nb = sh.n / kQK8_0;
    std::vector<BlockQ8_0> xq;
    std::vector<float> ref(sh.m * sh.tokens);
    const void* xin = x.data();
    if (kQuant) {
      xq.resize(sh.tokens * nb);
      for (int64_t k = 0; k < sh.tokens; ++k) kernels::ref::quantize_row_q8_0(x.data() + k * sh.n, xq.data() + k * nb, sh.n);
      xin = xq.data();
      kernels::ref::matmul(W, sh.n, w.data(), rb, 0, sh.m, xq.data(), nb * sizeof(BlockQ8_0), sh.tokens, ref.data(), sh.m);
    } else {
      kernels::ref::matmul(W, sh.n, w.data(), rb, 0, sh.m, x.data(), sh.n * 4, sh.tokens, ref.data(), sh.m);
    }
    const bool vec = cuda::lanes::vector_loads(W, w.data(), rb, sh.n, xin);
    const std::vector<float> got = run_lanes<W, 1>(w.data(), sh.m, sh.n, xin, sh.tokens, vec);
    for (int64_t i = 0; i < sh.m * sh.tokens; ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "output " << i << " unwritten";
      EXPECT_NEAR(got[i], ref[i], 2e-6 * sh.n + 1e-6) << "output " << i;
    }
    // Two rows a warp, other token tiles (the kernel's 1, 16 and 32), element-by-element loads: the same bits.
    const std::vector<float> two = run_lanes<W, 2>(w.data(), sh.m, sh.n, xin, sh.tokens, vec);
    const std::vector<float> t1 = run_lanes<W, 2, 1>(w.data(), sh.m, sh.n, xin, sh.tokens, vec);
    const std::vector<float> t16 = run_lanes<W, 1, 16>(w.data(), sh.m, sh.n, xin, sh.tokens, vec);
    const std::vector<float> t32 = run_lanes<W, 1, 32>(w.data(), sh.m, sh.n, xin, sh.tokens, vec);
    const std::vector<float> scalar = run_lanes<W, 1>(w.data(), sh.m, sh.n, xin, sh.tokens, false);
    for (int64_t i = 0; i < sh.m * sh.tokens; ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &two[i], 4), 0) << "two rows a warp differ at " << i;
      ASSERT_EQ(std::memcmp(&got[i], &t1[i], 4), 0) << "one token a pass differs at " << i;
      ASSERT_EQ(std::memcmp(&got[i], &t16[i], 4), 0) << "16 tokens a pass differ at " << i;
      ASSERT_EQ(std::memcmp(&got[i], &t32[i], 4), 0) << "32 tokens a pass differ at " << i;
      ASSERT_EQ(std::memcmp(&got[i], &scalar[i], 4), 0) << "element-by-element loads differ at " << i;
    }
    // Each token alone: the same bits as inside the launch.
    for (int64_t k = 0; k < sh.tokens; ++k) {
      const void* xk = kQuant ? static_cast<const void*>(xq.data() + k * nb) : static_cast<const void*>(x.data() + k * sh.n);
      const std::vector<float> alone =
          run_lanes<W, 1>(w.data(), sh.m, sh.n, xk, 1, cuda::lanes::vector_loads(W, w.data(), rb, sh.n, xk));
      for (int64_t r = 0; r < sh.m; ++r) {
        ASSERT_EQ(std::memcmp(&alone[r], &got[k * sh.m + r], 4), 0) << "token " << k << " row " << r;
      }
    }
  }
}

TEST(CudaMatmulLanesTest, F32MatchesReferenceAndIsInvariant) { check_type<DType::kF32>(11); }
TEST(CudaMatmulLanesTest, F16MatchesReferenceAndIsInvariant) { check_type<DType::kF16>(12); }
TEST(CudaMatmulLanesTest, Bf16MatchesReferenceAndIsInvariant) { check_type<DType::kBF16>(13); }
TEST(CudaMatmulLanesTest, Q8_0MatchesReferenceAndIsInvariant) { check_type<DType::kQ8_0>(14); }
TEST(CudaMatmulLanesTest, Q4_0MatchesReferenceAndIsInvariant) { check_type<DType::kQ4_0>(15); }

// Each lane's block quarters add up to the reference's exact integer block sum.
TEST(CudaMatmulLanesTest, BlockQuartersSumToTheExactIntegerDot) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 200; ++trial) {
    BlockQ4_0 w4;
    BlockQ8_0 w8, xb;
    for (auto& q : w4.qs) q = static_cast<uint8_t>(byte(rng));
    for (auto& q : w8.qs) q = static_cast<int8_t>(byte(rng) - 128);
    for (auto& q : xb.qs) q = static_cast<int8_t>(trial < 2 ? (trial == 0 ? -128 : 127) : byte(rng) - 128);
    int32_t e4 = 0, e8 = 0, g4 = 0, g8 = 0;
    for (int j = 0; j < 16; ++j) e4 += ((w4.qs[j] & 0x0f) - 8) * xb.qs[j] + ((w4.qs[j] >> 4) - 8) * xb.qs[j + 16];
    for (int j = 0; j < 32; ++j) e8 += w8.qs[j] * xb.qs[j];
    for (int q = 0; q < 4; ++q) {
      int wq[2], xq[2];
      cuda::lanes::weight_quarter<DType::kQ4_0>(reinterpret_cast<const uint8_t*>(&w4), q, wq);
      cuda::lanes::act_quarter<DType::kQ4_0>(reinterpret_cast<const uint8_t*>(&xb), q, xq);
      g4 += cuda::lanes::dp4a(wq[0], xq[0], cuda::lanes::dp4a(wq[1], xq[1], 0));
      cuda::lanes::weight_quarter<DType::kQ8_0>(reinterpret_cast<const uint8_t*>(&w8), q, wq);
      cuda::lanes::act_quarter<DType::kQ8_0>(reinterpret_cast<const uint8_t*>(&xb), q, xq);
      g8 += cuda::lanes::dp4a(wq[0], xq[0], cuda::lanes::dp4a(wq[1], xq[1], 0));
    }
    ASSERT_EQ(g4, e4) << "trial " << trial;
    ASSERT_EQ(g8, e8) << "trial " << trial;
  }
}

}  // namespace
}  // namespace hz
