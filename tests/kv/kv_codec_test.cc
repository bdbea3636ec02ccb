// KV codecs: the AVX2 decoder and encoder match the scalar reference bit for bit, the E4M3
// conversions round-trip every finite value, and each codec's round-trip error stays within its
// format's resolution.
#include "kernels/kv_codec.h"
#include "kernels/avx2/avx2_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace hz::kernels {
namespace {

const KvCodec kAll[] = {KvCodec::kF32,  KvCodec::kF16,  KvCodec::kBF16, KvCodec::kFp8,
                        KvCodec::kInt8, KvCodec::kInt8c, KvCodec::kInt4, KvCodec::kInt4c,
                        KvCodec::kInt3, KvCodec::kInt2};

std::vector<float> random_rows(int64_t rows, int64_t hd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(rows * hd);
  for (auto& v : x) v = nd(rng) * (rng() % 4 == 0 ? 8.0f : 1.0f);
  return x;
}

size_t scale_bytes(KvCodec c, int64_t rows, int64_t hd) {
  return static_cast<size_t>(kv_head_scale_bytes(c, hd) + rows * kv_row_scale_bytes(c, hd));
}

TEST(KvCodecTest, E4m3RoundTripsEveryFiniteValue) {
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f) continue;  // NaN
    float f = e4m3_to_f32(static_cast<uint8_t>(v));
    uint8_t back = f32_to_e4m3(f);
    if (v == 0x80) {
      EXPECT_EQ(e4m3_to_f32(back), 0.0f);
      continue;
    }
    EXPECT_EQ(back, v) << "value " << f;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f32_to_e4m3(1e6f), 0x7e);   // saturates
  EXPECT_EQ(f32_to_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(e4m3_to_f32(0x01), 1.0f / 512);  // smallest subnormal
  // Halfway between 1.0 (0x38) and 1.125 (0x39) rounds to even (1.0); just above rounds up.
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_e4m3(1.07f), 0x39);
}

TEST(KvCodecTest, Avx2MatchesReferenceBitForBit) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (KvCodec c : kAll) {
    for (int64_t hd : {4, 8, 32, 40, 64, 128}) {
      const int64_t rows = 16;
      auto x = random_rows(rows, hd, static_cast<uint32_t>(hd) * 7 + static_cast<uint32_t>(c));
      const size_t eb = rows * kv_row_elem_bytes(c, hd), sb = scale_bytes(c, rows, hd);
      std::vector<uint8_t> e1(eb), s1(sb + 4), e2(eb), s2(sb + 4);
      ref::encode_kv_rows(c, x.data(), rows, hd, e1.data(), s1.data());
      avx2::encode_kv_rows(c, x.data(), rows, hd, e2.data(), s2.data());
      ASSERT_EQ(0, std::memcmp(e1.data(), e2.data(), eb)) << static_cast<int>(c) << " hd " << hd;
      ASSERT_EQ(0, std::memcmp(s1.data(), s2.data(), sb));
      // Decode every sub-range of rows (tiles start anywhere in a block).
      for (int64_t r0 : {0, 3, 15}) {
        const int64_t n = rows - r0;
        const uint8_t* scales = s1.data() + r0 * kv_row_scale_bytes(c, hd);  // per-head scales: the same for any r0
        std::vector<float> y1(n * hd), y2(n * hd);
        ref::decode_kv_rows(c, e1.data() + r0 * kv_row_elem_bytes(c, hd), scales, n, hd, y1.data());
        avx2::decode_kv_rows(c, e1.data() + r0 * kv_row_elem_bytes(c, hd), scales, n, hd, y2.data());
        ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << static_cast<int>(c) << " hd " << hd;
      }
    }
  }
}

// Round-trip error relative to the largest magnitude in the scale's scope: the format's step.
TEST(KvCodecTest, RoundTripErrorWithinResolution) {
  struct Bound {
    KvCodec c;
    float rel;  // max |x - decode(encode(x))| / max|x| in the scale group
  };
  // f16: 2^-11 relative per value; bf16: 2^-8; fp8 (3-bit mantissa): half a step at the top
  // binade = 2^-4 of the value, and the block scale adds f32 rounding only; int8: half of
  // amax/127 plus the f16 rounding of the scale (2^-11 of amax); int4: Q4_0's step is amax/8 and
  // its clamp at +7 costs up to one full step.
  const Bound bounds[] = {{KvCodec::kF32, 0}, {KvCodec::kF16, 1.0f / 2048}, {KvCodec::kBF16, 1.0f / 256},
                          {KvCodec::kFp8, 1.0f / 16}, {KvCodec::kInt8, 0.5f / 127 + 1.0f / 2048},
                          {KvCodec::kInt4, 1.0f / 8 + 1.0f / 2048}};
  for (const Bound& b : bounds) {
    const int64_t rows = 16, hd = 64;
    auto x = random_rows(rows, hd, 3);
    std::vector<uint8_t> e(rows * kv_row_elem_bytes(b.c, hd)), s(scale_bytes(b.c, rows, hd) + 4);
    std::vector<float> y(rows * hd);
    encode_kv_rows(b.c, x.data(), rows, hd, e.data(), s.data());
    decode_kv_rows(b.c, e.data(), s.data(), rows, hd, y.data());
    const int64_t g = (b.c == KvCodec::kInt8 || b.c == KvCodec::kInt4) ? kv_group(hd) : 1;
    float block_amax = 0;
    for (float v : x) block_amax = std::max(block_amax, std::fabs(v));
    for (int64_t i = 0; i < rows * hd; i += g) {
      float amax = 0;
      for (int64_t j = i; j < i + g; ++j) amax = std::max(amax, std::fabs(x[j]));
      if (b.c == KvCodec::kFp8) amax = std::fabs(x[i]) > block_amax / 64 ? std::fabs(x[i]) : block_amax / 64;
      for (int64_t j = i; j < i + g; ++j) {
        EXPECT_LE(std::fabs(x[j] - y[j]), b.rel * amax + 1e-7f) << "codec " << static_cast<int>(b.c) << " at " << j;
      }
    }
  }
}

TEST(KvCodecTest, GroupsNeverSpanHeadsAndShortGroupsWork) {
  // head_dim 40: groups of 32 and 8; a huge value in the second group must not change the first's scale.
  const int64_t hd = 40;
  std::vector<float> x(hd, 0.5f);
  x[35] = 1000.0f;
  for (KvCodec c : {KvCodec::kInt8, KvCodec::kInt4}) {
    std::vector<uint8_t> e(kv_row_elem_bytes(c, hd)), s(kv_row_scale_bytes(c, hd));
    std::vector<float> y(hd);
    encode_kv_rows(c, x.data(), 1, hd, e.data(), s.data());
    decode_kv_rows(c, e.data(), s.data(), 1, hd, y.data());
    for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], 0.5f, 1e-3f) << i;
    EXPECT_NEAR(y[35], 1000.0f, 1.0f);
  }
}

// int8c / int4c / int3 / int2 on Gaussian rows: the searched channel scales and offsets keep the relative squared
// error near what their levels allow for one channel over a 16-row block, and an outlier channel
// (x20) or an offset channel (+30) costs the other channels nothing (one scale per row would
// flatten them).
TEST(KvCodecTest, LowBitRoundTripErrorIsNearTheBestScale) {
  for (KvCodec c : {KvCodec::kInt8c, KvCodec::kInt4c, KvCodec::kInt3, KvCodec::kInt2}) {
    for (int64_t hd : {8, 64}) {
      for (int odd : {0, 1, 2}) {  // none, an outlier channel, an offset channel
        const int64_t rows = 16, blocks = 256;
        // measured int8c 0.000020, int4c 0.0040, int3 0.0166, int2 0.0746
        const double bound = c == KvCodec::kInt8c   ? 2.4e-5
                             : c == KvCodec::kInt4c ? 0.0048
                             : c == KvCodec::kInt3  ? 0.020
                                                    : 0.085;
        std::mt19937 rng(11);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        double err = 0, norm = 0;
        for (int64_t b = 0; b < blocks; ++b) {
          std::vector<float> x(rows * hd), y(rows * hd);
          for (auto& v : x) v = nd(rng);
          for (int64_t r = 0; r < rows; ++r) {
            if (odd == 1) x[r * hd + 3] *= 20.0f;
            if (odd == 2) x[r * hd + 3] += 30.0f;
          }
          std::vector<uint8_t> e(rows * kv_row_elem_bytes(c, hd)), s(scale_bytes(c, rows, hd));
          encode_kv_rows(c, x.data(), rows, hd, e.data(), s.data());
          decode_kv_rows(c, e.data(), s.data(), rows, hd, y.data());
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < hd; ++i) {
              if (odd != 0 && i == 3) continue;  // the other channels, each at unit scale
              const double v = x[r * hd + i], w = y[r * hd + i];
              err += (v - w) * (v - w);
              norm += v * v;
            }
          }
        }
        EXPECT_LT(err / norm, bound) << static_cast<int>(c) << " hd " << hd << " odd " << odd;
        EXPECT_GT(err / norm, bound / 4) << static_cast<int>(c) << " hd " << hd;  // the format's own loss
      }
    }
  }
}

// Edge inputs: NaN codes as the level nearest 0, +-Inf as the top / bottom level, and neither moves
// a channel's scale or offset; an all-zero channel decodes to zeros; head dims not a multiple of 8
// (AVX2 falls back) and single rows work, and AVX2 decodes these bytes exactly as the reference.
TEST(KvCodecTest, LowBitEdgeInputs) {
  for (KvCodec c : {KvCodec::kInt8c, KvCodec::kInt4c, KvCodec::kInt3, KvCodec::kInt2}) {
    const int top = (1 << kv_type_element_bits(c)) - 1;
    for (int64_t hd : {1, 3, 5, 8, 12, 24}) {
      for (int64_t rows : {1, 7, 16}) {
        std::vector<float> x(rows * hd);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < hd; ++i) x[r * hd + i] = i == 0 ? 0.0f : static_cast<float>((r * 7 + i * 3) % 9) - 4.0f;
        }
        x[hd - 1] = std::nanf("");
        if (rows > 1) x[hd + hd - 1] = INFINITY;
        if (rows > 2) x[2 * hd + hd - 1] = -INFINITY;
        std::vector<uint8_t> e(rows * kv_row_elem_bytes(c, hd)), s(scale_bytes(c, rows, hd));
        std::vector<float> y(rows * hd), y2(rows * hd);
        ref::encode_kv_rows(c, x.data(), rows, hd, e.data(), s.data());
        ref::decode_kv_rows(c, e.data(), s.data(), rows, hd, y.data());
        EXPECT_EQ(s[0], 0) << "an all-zero channel";
        for (int64_t r = 0; r < rows; ++r) {
          EXPECT_EQ(y[r * hd], 0.0f);
          for (int64_t i = 0; i < hd; ++i) EXPECT_TRUE(std::isfinite(y[r * hd + i])) << r << " " << i;
        }
        if (hd > 1 && rows > 2) {
          // NaN is the level nearest 0.
          const float d = kv_byte_scale(s[hd - 1]), off = kv_channel_offset(c, s.data(), hd, hd - 1);
          for (int q = 0; q <= top; ++q) EXPECT_LE(std::fabs(y[hd - 1]), std::fabs((q + off) * d) + 1e-6f);
          EXPECT_EQ(y[hd + hd - 1], (top + off) * d) << "+Inf: the top level";
          EXPECT_EQ(y[2 * hd + hd - 1], off * d) << "-Inf: the bottom level";
          // The finite range 8 over `top` steps (int4c 0.53, int3 1.14, int2 2.67), searched 0.6-1.19x.
          EXPECT_GT(d, 4.0f / static_cast<float>(top)) << "the finite values (-4..4) set the scale, not the infinities";
          EXPECT_LT(d, 4.0f);
        }
        if (isa_supported(Isa::kAvx2)) {
          avx2::decode_kv_rows(c, e.data(), s.data(), rows, hd, y2.data());
          EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * 4)) << static_cast<int>(c) << " hd " << hd;
        }
      }
    }
  }
  // Magnitudes past the largest scale (and ranges that overflow) clamp, finite and defined.
  for (KvCodec c : {KvCodec::kInt8c, KvCodec::kInt4c, KvCodec::kInt3, KvCodec::kInt2}) {
    std::vector<float> x = {3e38f, -3e38f, 1e30f, 0.0f, -3e38f, 3e38f, 1e-30f, 0.0f};
    std::vector<uint8_t> e(2 * kv_row_elem_bytes(c, 4)), s(scale_bytes(c, 2, 4));
    std::vector<float> y(8);
    ref::encode_kv_rows(c, x.data(), 2, 4, e.data(), s.data());
    ref::decode_kv_rows(c, e.data(), s.data(), 2, 4, y.data());
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
    EXPECT_EQ(s[0], 127);  // the largest scale
  }
  // The scale byte: quarter octaves, 0 is 0.
  EXPECT_EQ(kv_byte_scale(0), 0.0f);
  EXPECT_EQ(kv_byte_scale(64), 1.0f);
  EXPECT_EQ(kv_byte_scale(64 + 4), 2.0f);
  EXPECT_EQ(kv_byte_scale(60), 0.5f);
}

}  // namespace
}  // namespace hz::kernels
