// Q4_K / Q6_K quantizers: round trips through the existing dequantizers within the error a 4- or
// 6-bit code allows, dot products through the k-quant kernels agree with the dequantized weights,
// and llama.cpp-quantized rows survive re-quantization.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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

// The plain range fit the search must beat: per group of 32, scale = (max - min) / qmax over a range
// that includes 0, the 6-bit codes rounded up so the range still fits; Q6_K: the largest magnitude
// maps to -32 and the 8-bit scales are rounded. Dequantized values, for comparison.
std::vector<float> range_fit_round_trip(DType t, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t b = 0; b < x.size(); b += 256) {
    const float* xb = x.data() + b;
    if (t == DType::kQ6_K) {
      float s[16], smax = 0;
      for (int g = 0; g < 16; ++g) {
        float v = 0;
        for (int l = 0; l < 16; ++l) v = std::fabs(xb[g * 16 + l]) > std::fabs(v) ? xb[g * 16 + l] : v;
        s[g] = v / -32.0f;
        smax = std::fabs(s[g]) > std::fabs(smax) ? s[g] : smax;
      }
      const float d = f16_to_f32(f32_to_f16(smax / -128.0f));
      for (int g = 0; g < 16; ++g) {
        const float dg = d * std::clamp(std::lround(s[g] / d), -128l, 127l);
        for (int l = 0; l < 16; ++l) {
          const long q = dg != 0 ? std::clamp(std::lround(xb[g * 16 + l] / dg), -32l, 31l) : 0;
          y[b + g * 16 + l] = dg * q;
        }
      }
      continue;
    }
    const int qmax = t == DType::kQ4_K ? 15 : 31;
    float s[8], m[8], smax = 0, mmax = 0;
    for (int g = 0; g < 8; ++g) {
      float lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) lo = std::min(lo, xb[g * 32 + l]), hi = std::max(hi, xb[g * 32 + l]);
      s[g] = (hi - lo) / qmax;
      m[g] = -lo;
      smax = std::max(smax, s[g]);
      mmax = std::max(mmax, m[g]);
    }
    const float d = f16_to_f32(f32_to_f16(smax / 63)), dm = f16_to_f32(f32_to_f16(mmax / 63));
    for (int g = 0; g < 8; ++g) {
      const float dg = d * std::clamp(std::ceil(s[g] / d - 1e-4f), 0.0f, 63.0f);
      const float mg = dm > 0 ? dm * std::clamp(std::round(m[g] / dm), 0.0f, 63.0f) : 0.0f;
      for (int l = 0; l < 32; ++l) {
        const float q = dg > 0 ? std::clamp(std::round((xb[g * 32 + l] + mg) / dg), 0.0f, float(qmax)) : 0.0f;
        y[b + g * 32 + l] = dg * q - mg;
      }
    }
  }
  return y;
}

// Squared error weighted as the search weighs it (group RMS + magnitude), per super-block.
std::vector<double> weighted_block_errors(const std::vector<float>& x, const std::vector<float>& y, int group) {
  std::vector<double> out;
  for (size_t b = 0; b < x.size(); b += 256) {
    double e = 0;
    for (size_t g = b; g < b + 256; g += group) {
      double s2 = 0;
      for (int l = 0; l < group; ++l) s2 += double(x[g + l]) * x[g + l];
      const double rms = std::sqrt(s2 / group);
      for (int l = 0; l < group; ++l) e += (rms + std::fabs(x[g + l])) * (x[g + l] - y[g + l]) * (x[g + l] - y[g + l]);
    }
    out.push_back(e);
  }
  return out;
}

// The scale/min search beats the plain range fit: lower total error by a clear margin on Gaussian,
// heavy-tailed and offset data, and no block much worse than the range fit's.
TEST(KQuantQuantizeTest, SearchBeatsRangeFit) {
  std::mt19937 rng(42);
  std::student_t_distribution<float> heavy(3.0f);
  std::vector<std::pair<const char*, std::vector<float>>> data;
  data.emplace_back("gaussian", gaussian(256 * 64, 7, 0.02f));
  std::vector<float> tails(256 * 64);
  for (auto& v : tails) v = 0.01f * heavy(rng);
  data.emplace_back("student-t", tails);
  auto offset = gaussian(256 * 64, 8);
  for (auto& v : offset) v = 0.5f + 0.1f * v;
  data.emplace_back("offset", offset);
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const int group = t == DType::kQ6_K ? 16 : 32;
    for (const auto& [name, x] : data) {
      const auto ours = weighted_block_errors(x, round_trip(t, x), group);
      const auto base = weighted_block_errors(x, range_fit_round_trip(t, x), group);
      double sum_ours = 0, sum_base = 0;
      for (size_t b = 0; b < ours.size(); ++b) {
        sum_ours += ours[b];
        sum_base += base[b];
        EXPECT_LE(ours[b], base[b] * 1.05) << dtype_name(t) << " " << name << " block " << b;
      }
      std::printf("%s %s: error %.3f of the range fit's\n", dtype_name(t), name, sum_ours / sum_base);
      EXPECT_LT(sum_ours, sum_base * (t == DType::kQ6_K ? 0.95 : 0.85)) << dtype_name(t) << " " << name;
    }
  }
}

// A row that is already on a Q4_K/Q5_K/Q6_K grid (the dequantized output of the quantizer) is
// quantized again with (almost) no further loss, and the second pass is never worse than the first.
TEST(KQuantQuantizeTest, RequantizingDequantizedRowsIsNearlyLossless) {
  auto x = gaussian(256 * 16, 21, 0.03f);
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const auto y1 = round_trip(t, x);
    const auto y2 = round_trip(t, y1);
    EXPECT_LT(rel_rmse(y1, y2), 0.25 * rel_rmse(x, y1)) << dtype_name(t);
    EXPECT_LT(rel_rmse(x, y2), 1.1 * rel_rmse(x, y1)) << dtype_name(t);
  }
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
