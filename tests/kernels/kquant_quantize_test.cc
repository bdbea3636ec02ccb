// Q4_K / Q6_K quantizers: round trips through the existing dequantizers within the error a 4- or
// 6-bit code allows, dot products through the k-quant kernels agree with the dequantized weights,
// and llama.cpp-quantized rows survive re-quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "format/gguf.h"
#include "kernels/kernels.h"
#include "kernels/quantize_kquants.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::vector<float> gaussian(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, x.size()));
  if (t == DType::kQ4_K) kernels::quantize_row_q4_k(x.data(), reinterpret_cast<BlockQ4_K*>(q.data()), x.size());
  else if (t == DType::kQ5_K) kernels::quantize_row_q5_k(x.data(), reinterpret_cast<BlockQ5_K*>(q.data()), x.size());
  else kernels::quantize_row_q6_k(x.data(), reinterpret_cast<BlockQ6_K*>(q.data()), x.size());
  return q;
}

// RMS error relative to the RMS of x.
double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (x[i] - y[i]) * (x[i] - y[i]);
    s += x[i] * x[i];
  }
  return std::sqrt(e / std::max(s, 1e-30));
}

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  auto q = quantize(t, x);
  std::vector<float> y(x.size());
  kernels::dequantize_row(t, q.data(), y.data(), x.size());
  return y;
}

TEST(KQuantQuantizeTest, RoundTripErrorWithinCodeResolution) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto x = gaussian(4096, seed, 0.02f * seed);
    // 4 bits over a group's range (~5 sigma for 32 samples): step/sqrt(12) ~ 0.1 sigma.
    EXPECT_LT(rel_rmse(x, round_trip(DType::kQ4_K, x)), 0.12) << seed;
    // 6 bits over +-max of 16 samples: ~0.02 sigma.
    EXPECT_LT(rel_rmse(x, round_trip(DType::kQ6_K, x)), 0.03) << seed;
  }
  // Q6_K is strictly finer than Q4_K on the same data.
  auto x = gaussian(2048, 9);
  EXPECT_LT(rel_rmse(x, round_trip(DType::kQ6_K, x)), rel_rmse(x, round_trip(DType::kQ4_K, x)) / 2);
}

// Q5_K: the 5th bit of every code lands where ggml's layout (and our dequantizer) reads it: the
// error halves against Q4_K on the same data (a misplaced bit would make it far larger), and
// codes written one by one come back exactly.
TEST(KQuantQuantizeTest, Q5KLayoutAndResolution) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto x = gaussian(2048, seed);
    const double e4 = rel_rmse(x, round_trip(DType::kQ4_K, x)), e5 = rel_rmse(x, round_trip(DType::kQ5_K, x));
    EXPECT_LT(e5, e4 * 0.6) << seed;
    EXPECT_LT(e5, 0.06) << seed;
  }
  // A ramp through all 32 codes in every group comes back within the rounding of the scales.
  std::vector<float> ramp(256);
  for (int e = 0; e < 256; ++e) ramp[e] = static_cast<float>(e % 32);  // group g holds 0..31
  auto y = round_trip(DType::kQ5_K, ramp);
  for (int e = 0; e < 256; ++e) EXPECT_NEAR(y[e], ramp[e], 0.02f) << e;
}

TEST(KQuantQuantizeTest, ZerosOffsetsAndOutliers) {
  std::vector<float> zeros(512, 0.0f);
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    auto y = round_trip(t, zeros);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
  // All-positive data with an offset (Q4_K's min term) and one outlier per super-block.
  auto x = gaussian(1024, 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3.0f + 0.1f * x[i] + (i % 256 == 17 ? 5.0f : 0.0f);
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    auto y = round_trip(t, x);
    // Q6_K has no offset term: its 6-bit code spans +-8 here, so its error is larger than on
    // centred data.
    EXPECT_LT(rel_rmse(x, y), t == DType::kQ4_K ? 0.05 : t == DType::kQ5_K ? 0.025 : 0.02) << dtype_name(t);
    EXPECT_NEAR(y[17], x[17], 0.15f) << dtype_name(t);  // the outlier keeps its value
  }
}

// The quantized rows are read correctly by the k-quant dot kernels (active ISA), not just by the
// dequantizer: dot(w_q, x) vs dot(dequant(w_q), x).
TEST(KQuantQuantizeTest, DotKernelsReadTheLayout) {
  const int64_t n = 1024;
  auto w = gaussian(n, 11);
  auto x = gaussian(n, 12);
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    auto wq = quantize(t, w);
    std::vector<float> wd(n);
    kernels::dequantize_row(t, wq.data(), wd.data(), n);
    double ref = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += wd[i] * x[i];
      norm += std::fabs(wd[i] * x[i]);
    }
    std::vector<uint8_t> xq(kernels::activation_row_bytes(t, n));
    kernels::quantize_activation_row(t, x.data(), xq.data(), n);
    float got = 0;
    kernels::vec_dot(t, n, wq.data(), xq.data(), &got);
    EXPECT_NEAR(got, ref, 0.01 * norm) << dtype_name(t);
  }
}

// Rows quantized by llama.cpp (real k-quant blocks), dequantized and quantized again by us, come
// back close to llama.cpp's values.
TEST(KQuantQuantizeTest, RequantizesLlamaCppRows) {
  for (auto [file, t] : {std::pair{"synth-small-q6_k.gguf", DType::kQ6_K}, std::pair{"synth-small-q4_k_m.gguf", DType::kQ4_K}}) {
    auto f = GgufFile::open(test::model_path(file));
    ASSERT_TRUE(f.ok()) << f.status().message();
    const TensorInfo* info = nullptr;
    for (const auto& ti : f->tensors()) {
      if (ti.dtype == t) {
        info = &ti;
        break;
      }
    }
    ASSERT_NE(info, nullptr) << file;
    const int64_t n = static_cast<int64_t>(info->dims[0]);
    std::vector<float> x(n);
    kernels::dequantize_row(t, info->data, x.data(), n);
    EXPECT_LT(rel_rmse(x, round_trip(t, x)), t == DType::kQ4_K ? 0.12 : 0.03) << file << " " << info->name;
  }
}

}  // namespace
}  // namespace hz
