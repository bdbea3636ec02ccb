// Fused attention kernels (kernels/attn_kernels.h): the reference equals decode-then-dot, the AVX2
// variants match the reference on random data and edge cases (head dims 4..128, tiles of 1..16
// rows, small and large magnitudes, NaN/Inf), and a head's result does not depend on its group size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/attn_kernels.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/kernels.h"
#include "kernels/kv_codec.h"

namespace hz::kernels {
namespace {

constexpr KvCodec kCodecs[] = {KvCodec::kF32,  KvCodec::kF16,  KvCodec::kBF16, KvCodec::kFp8,
                               KvCodec::kInt8, KvCodec::kInt8c, KvCodec::kInt4, KvCodec::kInt4c,
                               KvCodec::kInt3, KvCodec::kInt2};
constexpr int64_t kHeadDims[] = {4, 8, 32, 64, 128};

// `rows` encoded rows of random values of magnitude about `mag`.
struct Rows {
  std::vector<float> x;  // the f32 input
  std::vector<uint8_t> elems, scales;
  Rows(KvCodec c, int64_t rows, int64_t hd, float mag, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, mag);
    x.resize(rows * hd);
    for (auto& v : x) v = nd(rng);
    elems.resize(kv_row_elem_bytes(c, hd) * rows + 8);
    scales.resize(std::max<int64_t>(4, kv_head_scale_bytes(c, hd) + kv_row_scale_bytes(c, hd) * rows));
    ref::encode_kv_rows(c, x.data(), rows, hd, elems.data(), scales.data());
  }
};

std::vector<float> randoms(int64_t n, float mag, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, mag);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

bool avx2() { return isa_supported(Isa::kAvx2); }

TEST(AttnKernelsRefTest, ScoresAndAccumulationEqualDecodeThenDot) {
  for (KvCodec c : kCodecs) {
    for (int64_t hd : kHeadDims) {
      const int64_t rows = 13, heads = 3;
      Rows r(c, rows, hd, 1.0f, 7);
      std::vector<float> dec(rows * hd);
      ref::decode_kv_rows(c, r.elems.data(), r.scales.data(), rows, hd, dec.data());
      auto q = randoms(heads * hd, 1.0f, 3);
      std::vector<float> s(heads * rows);
      ref::kv_scores(c, q.data(), heads, r.elems.data(), r.scales.data(), rows, hd, s.data());
      auto p = randoms(heads * rows, 0.5f, 4);
      std::vector<float> acc(heads * hd, 0.0f), want(heads * hd, 0.0f);
      ref::kv_accumulate(c, p.data(), heads, r.elems.data(), r.scales.data(), rows, hd, acc.data());
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t j = 0; j < rows; ++j) {
          double d = 0, mag = 0;
          for (int64_t i = 0; i < hd; ++i) {
            d += static_cast<double>(q[h * hd + i]) * dec[j * hd + i];
            mag += std::fabs(static_cast<double>(q[h * hd + i]) * dec[j * hd + i]);
          }
          EXPECT_NEAR(s[h * rows + j], d, 1e-5 * mag + 1e-30) << static_cast<int>(c) << " hd " << hd;
          for (int64_t i = 0; i < hd; ++i) want[h * hd + i] += p[h * rows + j] * dec[j * hd + i];
        }
      }
      for (int64_t i = 0; i < heads * hd; ++i) EXPECT_NEAR(acc[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
    }
  }
}

// |a - b| within rel * magnitude, or both NaN, or equal infinities.
void expect_close(float a, float b, double tol, const char* what) {
  if (std::isnan(b)) {
    EXPECT_TRUE(std::isnan(a)) << what;
  } else if (std::isinf(b)) {
    EXPECT_EQ(a, b) << what;
  } else {
    EXPECT_NEAR(a, b, tol) << what;
  }
}

TEST(AttnKernelsAvx2Test, MatchReferenceOnRandomRows) {
  if (!avx2()) GTEST_SKIP() << "CPU lacks avx2/fma/f16c";
  uint32_t seed = 1;
  for (KvCodec c : kCodecs) {
    for (int64_t hd : kHeadDims) {
      for (float mag : {1e-3f, 1.0f, 300.0f}) {
        for (int64_t rows = 1; rows <= 16; ++rows) {
          const int32_t heads = static_cast<int32_t>(1 + rows % 8);  // 1..8 heads
          Rows r(c, rows, hd, mag, ++seed);
          auto q = randoms(heads * hd, 1.0f, ++seed);
          std::vector<float> s_ref(heads * rows), s_avx(heads * rows);
          ref::kv_scores(c, q.data(), heads, r.elems.data(), r.scales.data(), rows, hd, s_ref.data());
          avx2::kv_scores(c, q.data(), heads, r.elems.data(), r.scales.data(), rows, hd, s_avx.data());
          std::vector<float> dec(rows * hd);
          ref::decode_kv_rows(c, r.elems.data(), r.scales.data(), rows, hd, dec.data());
          for (int32_t h = 0; h < heads; ++h) {
            for (int64_t j = 0; j < rows; ++j) {
              double mabs = 0;
              for (int64_t i = 0; i < hd; ++i) mabs += std::fabs(q[h * hd + i] * dec[j * hd + i]);
              expect_close(s_avx[h * rows + j], s_ref[h * rows + j], 2e-6 * mabs + 1e-30, "scores");
            }
          }
          auto p = randoms(heads * rows, 0.3f, ++seed);
          auto acc0 = randoms(heads * hd, mag, ++seed);
          std::vector<float> a_ref = acc0, a_avx = acc0;
          ref::kv_accumulate(c, p.data(), heads, r.elems.data(), r.scales.data(), rows, hd, a_ref.data());
          avx2::kv_accumulate(c, p.data(), heads, r.elems.data(), r.scales.data(), rows, hd, a_avx.data());
          for (int32_t h = 0; h < heads; ++h) {
            for (int64_t i = 0; i < hd; ++i) {
              double mabs = std::fabs(acc0[h * hd + i]);
              for (int64_t j = 0; j < rows; ++j) mabs += std::fabs(p[h * rows + j] * dec[j * hd + i]);
              expect_close(a_avx[h * hd + i], a_ref[h * hd + i], 2e-6 * mabs + 1e-30, "accumulate");
            }
          }
        }
      }
    }
  }
}

TEST(AttnKernelsAvx2Test, HeadResultDoesNotDependOnGroupSize) {
  if (!avx2()) GTEST_SKIP() << "CPU lacks avx2/fma/f16c";
  for (KvCodec c : kCodecs) {
    const int64_t hd = 64, rows = 11;
    const int32_t heads = 7;  // chunks 4 + 2 + 1 (scores), 4 + 2 + 1 (accumulate)
    Rows r(c, rows, hd, 1.0f, 5);
    auto q = randoms(heads * hd, 1.0f, 6);
    auto p = randoms(heads * rows, 0.3f, 7);
    std::vector<float> s(heads * rows), acc(heads * hd, 0.0f);
    avx2::kv_scores(c, q.data(), heads, r.elems.data(), r.scales.data(), rows, hd, s.data());
    avx2::kv_accumulate(c, p.data(), heads, r.elems.data(), r.scales.data(), rows, hd, acc.data());
    for (int32_t h = 0; h < heads; ++h) {
      std::vector<float> s1(rows), a1(hd, 0.0f);
      avx2::kv_scores(c, q.data() + h * hd, 1, r.elems.data(), r.scales.data(), rows, hd, s1.data());
      avx2::kv_accumulate(c, p.data() + h * rows, 1, r.elems.data(), r.scales.data(), rows, hd, a1.data());
      EXPECT_EQ(0, std::memcmp(s1.data(), s.data() + h * rows, sizeof(float) * rows)) << static_cast<int>(c);
      EXPECT_EQ(0, std::memcmp(a1.data(), acc.data() + h * hd, sizeof(float) * hd)) << static_cast<int>(c);
    }
  }
}

TEST(AttnKernelsAvx2Test, NanAndInfPropagateLikeReference) {
  if (!avx2()) GTEST_SKIP() << "CPU lacks avx2/fma/f16c";
  for (KvCodec c : kCodecs) {
    for (int64_t hd : {8, 32, 64}) {
      const int64_t rows = 4;
      Rows r(c, rows, hd, 1.0f, 9);
      // A NaN query component: every score of that head is NaN in both.
      auto q = randoms(2 * hd, 1.0f, 10);
      q[3] = std::nanf("");
      q[hd + 1] = INFINITY;
      std::vector<float> s_ref(2 * rows), s_avx(2 * rows);
      ref::kv_scores(c, q.data(), 2, r.elems.data(), r.scales.data(), rows, hd, s_ref.data());
      avx2::kv_scores(c, q.data(), 2, r.elems.data(), r.scales.data(), rows, hd, s_avx.data());
      for (int64_t j = 0; j < rows; ++j) {
        EXPECT_TRUE(std::isnan(s_avx[j]));
        EXPECT_EQ(std::isnan(s_avx[rows + j]), std::isnan(s_ref[rows + j]));
        if (!std::isnan(s_ref[rows + j])) {
          EXPECT_EQ(s_avx[rows + j], s_ref[rows + j]);
        }
      }
    }
  }
  // fp8's NaN code (0x7f / 0xff) decodes to NaN through the f16 widening too.
  const int64_t hd = 8;
  std::vector<uint8_t> e(hd, 0x38);  // 1.0
  e[2] = 0x7f;
  e[5] = 0xff;
  const float scale = 1.0f;
  uint8_t sc[4];
  std::memcpy(sc, &scale, 4);
  std::vector<float> q(hd, 1.0f), s(1), acc(hd, 0.0f);
  avx2::kv_scores(KvCodec::kFp8, q.data(), 1, e.data(), sc, 1, hd, s.data());
  EXPECT_TRUE(std::isnan(s[0]));
  const float p = 0.5f;
  avx2::kv_accumulate(KvCodec::kFp8, &p, 1, e.data(), sc, 1, hd, acc.data());
  EXPECT_TRUE(std::isnan(acc[2]) && std::isnan(acc[5]));
  EXPECT_EQ(acc[0], 0.5f);
}

TEST(AttnKernelsAvx2Test, ExpShiftSumMatchesReference) {
  if (!avx2()) GTEST_SKIP() << "CPU lacks avx2/fma/f16c";
  for (int64_t n = 1; n <= 20; ++n) {
    auto x = randoms(n + 4, 5.0f, static_cast<uint32_t>(n));
    float mx = x[0];
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
    std::vector<float> a = x, b = x;
    const float sa = ref::exp_shift_sum(a.data(), n, mx);
    const float sb = avx2::exp_shift_sum(b.data(), n, mx);
    EXPECT_NEAR(sb, sa, 4e-7 * sa);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(b[i], a[i], 4e-7 * a[i] + 1e-38);
    for (int64_t i = n; i < n + 4; ++i) EXPECT_EQ(b[i], x[i]) << "wrote past n";
  }
}

// A softmax tile's state after a first tile and a second one (a new maximum in some heads, not in
// others): the AVX2 kernel against the reference, with NaN and infinite scores in some heads.
TEST(AttnKernelsAvx2Test, SoftmaxTileMatchesReference) {
  if (!avx2()) GTEST_SKIP() << "CPU lacks avx2/fma/f16c";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 24, 33}) {
    for (int32_t heads : {1, 4, 5}) {
      const int64_t hd = 24;
      const int64_t pf = 2 * heads + heads * hd;
      std::vector<float> pa(pf + 3, 123.0f), pb(pf + 3, 123.0f);
      for (int pass = 0; pass < 2; ++pass) {
        // Second pass: head 0's scores shifted up (a new maximum), head 1's down.
        auto s = randoms(heads * n + 4, 4.0f, static_cast<uint32_t>(n * 31 + heads + pass));
        for (int64_t j = 0; j < n && pass == 1; ++j) {
          s[j] += 10.0f;
          if (heads > 1) s[n + j] -= 10.0f;
        }
        if (heads == 5 && pass == 1) {
          s[2 * n + n / 2] = nan;
          s[3 * n] = inf;
          s[4 * n + n - 1] = -inf;
        }
        auto sa = s, sb = s;
        ref::softmax_tile(sa.data(), heads, n, hd, pass == 0, pa.data());
        avx2::softmax_tile(sb.data(), heads, n, hd, pass == 0, pb.data());
        if (pass == 0) {
          for (int64_t i = 2 * heads; i < pf; ++i) EXPECT_EQ(pa[i], 0.0f);
          // Values as kv_accumulate leaves them, so the second pass has something to rescale.
          for (int64_t i = 2 * heads; i < pf; ++i) pa[i] = pb[i] = static_cast<float>(i % 7) - 3.0f;
        }
        for (int32_t h = 0; h < heads; ++h) {
          const std::string what = "n=" + std::to_string(n) + " heads=" + std::to_string(heads) +
                                   " pass=" + std::to_string(pass) + " h=" + std::to_string(h);
          if (std::isnan(pa[h])) {
            EXPECT_TRUE(std::isnan(pb[h])) << what;
            EXPECT_TRUE(std::isnan(pb[heads + h])) << what;
            continue;
          }
          EXPECT_EQ(pb[h], pa[h]) << what << ": the maximum is exact";
          // A NaN or infinite score leaves NaN in the sum (a NaN never becomes the running maximum
          // of a later tile: max < NaN is false) in both kernels.
          auto close = [&](float got, float want, float tol) {
            if (std::isnan(want)) {
              EXPECT_TRUE(std::isnan(got)) << what;
            } else {
              EXPECT_NEAR(got, want, tol) << what;
            }
          };
          close(pb[heads + h], pa[heads + h], 1e-6f * pa[heads + h]);
          for (int64_t i = 0; i < hd; ++i) {
            const int64_t k = 2 * heads + h * hd + i;
            close(pb[k], pa[k], 1e-6f * std::fabs(pa[k]));
          }
          for (int64_t j = 0; j < n; ++j) close(sb[h * n + j], sa[h * n + j], 4e-7f * sa[h * n + j] + 1e-38f);
          if (heads == 5 && pass == 1 && (h == 2 || h == 3)) {
            EXPECT_TRUE(std::isnan(pa[heads + h])) << what << ": a NaN or +inf score makes the sum NaN";
          }
        }
        for (int64_t i = heads * n; i < heads * n + 4; ++i) EXPECT_EQ(sb[i], s[i]) << "wrote past the scores";
        for (int64_t i = pf; i < pf + 3; ++i) EXPECT_EQ(pb[i], 123.0f) << "wrote past the state";
      }
      // A new maximum scales the sum by exp(old - new): head 0 gained about 10 in the second pass.
      EXPECT_LT(pa[heads], 2.0f * static_cast<float>(n)) << "n=" << n;
    }
  }
}

}  // namespace
}  // namespace hz::kernels
