// The AVX-512 fused attention kernels (float, fp8 and int8 KV codecs) against the AVX2 ones, bit for
// bit (any NaN matches any NaN), and against the scalar reference within a tolerance: f32, f16,
// bf16, fp8 and int8 rows (with their scales);
// head counts that take every head-chunk path (1..9); row counts around the 16-row block, odd ones
// (a row paired with itself); head dims with and without a 16-element tail; random values, random
// bit patterns (NaN, Inf, subnormals) and accumulation into existing values. Other codecs must
// take the AVX2 path unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/kv_codec.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels {
namespace {

using test::float_bits;
using test::random_floats;

const char* kv_codec_name(KvCodec c) {
  switch (c) {
    case KvCodec::kF32: return "f32";
    case KvCodec::kF16: return "f16";
    case KvCodec::kBF16: return "bf16";
    case KvCodec::kInt8: return "int8";
    case KvCodec::kFp8: return "fp8";
    case KvCodec::kInt4: return "int4";
    default: return "other";
  }
}

// `rows` rows of hd values in codec c; random_bits: every bit pattern (NaN, Inf, subnormals).
std::vector<uint8_t> make_rows(KvCodec c, int64_t rows, int64_t hd, uint32_t seed, bool random_bits) {
  const int64_t reb = kv_row_elem_bytes(c, hd);
  std::vector<uint8_t> e(reb * rows);
  std::mt19937 rng(seed);
  if (random_bits) {
    for (auto& b : e) b = static_cast<uint8_t>(rng());
    return e;
  }
  if (c == KvCodec::kInt8) {
    for (auto& b : e) b = static_cast<uint8_t>(static_cast<int>(rng() % 255) - 127);
    return e;
  }
  if (c == KvCodec::kFp8) {
    for (auto& b : e) {
      do b = static_cast<uint8_t>(rng());
      while ((b & 0x7f) == 0x7f);  // no E4M3 NaN
    }
    return e;
  }
  const auto f = random_floats(rows * hd, seed, -2.0f, 2.0f);
  for (int64_t i = 0; i < rows * hd; ++i) {
    if (c == KvCodec::kF32) std::memcpy(e.data() + 4 * i, &f[i], 4);
    if (c == KvCodec::kF16) {
      const uint16_t h = f32_to_f16(f[i]);
      std::memcpy(e.data() + 2 * i, &h, 2);
    }
    if (c == KvCodec::kBF16) {
      uint32_t u;
      std::memcpy(&u, &f[i], 4);
      const uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(e.data() + 2 * i, &h, 2);
    }
  }
  return e;
}

// The scales a tile of codec c carries: int8 an f16 per row and group, fp8 one f32 for the head;
// none for the float codecs. random_bits: any bit pattern.
std::vector<uint8_t> make_scales(KvCodec c, int64_t rows, int64_t hd, uint32_t seed, bool random_bits) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> sc;
  if (c == KvCodec::kInt8) {
    sc.resize(2 * kv_groups(hd) * rows);
    for (size_t i = 0; i < sc.size(); i += 2) {
      const uint16_t d = random_bits ? static_cast<uint16_t>(rng()) : f32_to_f16(0.002f + 0.02f * (rng() % 1000) / 1000.0f);
      std::memcpy(sc.data() + i, &d, 2);
    }
  } else if (c == KvCodec::kFp8) {
    sc.resize(4);
    uint32_t u = static_cast<uint32_t>(rng());
    float f = 0.003f;
    if (random_bits) std::memcpy(&f, &u, 4);
    std::memcpy(sc.data(), &f, 4);
  }
  return sc;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(test::same_bits_or_nan(got[i], want[i])) << what << " at " << i << ": " << got[i] << " vs avx2 " << want[i];
  }
}

void check(KvCodec c, int32_t heads, int64_t rows, int64_t hd, uint32_t seed, bool random_bits) {
  const auto e = make_rows(c, rows, hd, seed, random_bits);
  const auto sv = make_scales(c, rows, hd, seed + 4, random_bits);
  const uint8_t* sc = sv.empty() ? nullptr : sv.data();
  const auto q = random_floats(heads * hd, seed + 1, -1.0f, 1.0f);
  const auto p = random_floats(heads * rows, seed + 2, 0.0f, 1.0f);
  const auto acc0 = random_floats(heads * hd, seed + 3, -1.0f, 1.0f);
  const std::string what = std::string(kv_codec_name(c)) + " heads=" + std::to_string(heads) +
                           " rows=" + std::to_string(rows) + " hd=" + std::to_string(hd) + (random_bits ? " bits" : "");
  std::vector<float> s_avx2(heads * rows + 5, -7.0f), s_512 = s_avx2;
  avx2::kv_scores(c, q.data(), heads, e.data(), sc, rows, hd, s_avx2.data());
  vnni::kv_scores(c, q.data(), heads, e.data(), sc, rows, hd, s_512.data());
  expect_same(s_512, s_avx2, "scores " + what);
  std::vector<float> a_avx2 = acc0, a_512 = acc0;
  a_avx2.resize(heads * hd + 5, -7.0f);
  a_512.resize(heads * hd + 5, -7.0f);
  avx2::kv_accumulate(c, p.data(), heads, e.data(), sc, rows, hd, a_avx2.data());
  vnni::kv_accumulate(c, p.data(), heads, e.data(), sc, rows, hd, a_512.data());
  expect_same(a_512, a_avx2, "accumulate " + what);
  if (!random_bits) {
    // The AVX2 kernels are themselves the reference's up to rounding: a broken pair cannot pass.
    std::vector<float> s_ref(heads * rows);
    ref::kv_scores(c, q.data(), heads, e.data(), sc, rows, hd, s_ref.data());
    for (int64_t i = 0; i < heads * rows; ++i) ASSERT_NEAR(s_512[i], s_ref[i], 1e-4f * hd) << what << " " << i;
  }
}

class Avx512AttnTest : public ::testing::TestWithParam<KvCodec> {};

TEST_P(Avx512AttnTest, MatchesAvx2BitForBit) {
  HZ_SKIP_WITHOUT_AVX512();
  uint32_t seed = 100;
  for (int64_t hd : {8, 16, 24, 64, 72, 128, 256}) {
    for (int32_t heads : {1, 2, 3, 4, 5, 8, 9}) {
      for (int64_t rows : {1, 2, 3, 7, 9, 12, 16, 17, 33}) {
        check(GetParam(), heads, rows, hd, seed++, false);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_P(Avx512AttnTest, RandomBitPatternsMatchAvx2) {
  HZ_SKIP_WITHOUT_AVX512();
  uint32_t seed = 900;
  for (int64_t hd : {24, 64}) {
    for (int32_t heads : {1, 4, 9}) {
      for (int64_t rows : {5, 16, 31}) {
        check(GetParam(), heads, rows, hd, seed++, true);
        if (HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, Avx512AttnTest,
                         ::testing::Values(KvCodec::kF32, KvCodec::kF16, KvCodec::kBF16, KvCodec::kFp8, KvCodec::kInt8),
                         [](const auto& info) { return std::string(kv_codec_name(info.param)); });

// Codecs the 512-bit kernels do not take (and head dims the vector paths do not take) give exactly
// the AVX2 result.
TEST(Avx512AttnFallbackTest, OtherCodecsAndHeadDimsAreTheAvx2Path) {
  HZ_SKIP_WITHOUT_AVX512();
  const int32_t heads = 4;
  const int64_t rows = 9;
  for (auto [c, hd] : {std::pair{KvCodec::kInt4, int64_t{64}}, std::pair{KvCodec::kF16, int64_t{12}}}) {
    const int64_t reb = kv_row_elem_bytes(c, hd);
    std::vector<uint8_t> e(reb * rows);
    std::mt19937 rng(5);
    for (auto& b : e) b = static_cast<uint8_t>(rng() % 100);
    std::vector<uint8_t> scales(2 * kv_groups(hd) * rows);
    for (size_t i = 0; i < scales.size(); i += 2) {
      const uint16_t d = f32_to_f16(0.01f);
      std::memcpy(scales.data() + i, &d, 2);
    }
    const auto q = random_floats(heads * hd, 6);
    std::vector<float> a(heads * rows), b(heads * rows);
    avx2::kv_scores(c, q.data(), heads, e.data(), scales.data(), rows, hd, a.data());
    vnni::kv_scores(c, q.data(), heads, e.data(), scales.data(), rows, hd, b.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << kv_codec_name(c) << " hd=" << hd;
  }
}

// The softmax tile on 16 lanes: the AVX2 kernel's state and probabilities bit for bit, tiles of
// 1..16 scores (and longer ones, which take the AVX2 path), first and later tiles, random values
// and random bit patterns (NaN, Inf, subnormals) in the scores.
TEST(Avx512SoftmaxTileTest, MatchesAvx2BitForBit) {
  HZ_SKIP_WITHOUT_AVX512();
  std::mt19937 rng(77);
  for (int64_t n = 1; n <= 20; ++n) {
    for (int32_t heads : {1, 4, 7}) {
      for (bool bits : {false, true}) {
        const int64_t hd = 40;
        const int64_t pf = 2 * heads + heads * hd;
        auto state = random_floats(pf, static_cast<uint32_t>(n * 13 + heads), -2.0f, 2.0f);
        std::vector<float> pa = state, pb = state;
        for (int pass = 0; pass < 3; ++pass) {
          auto s = random_floats(heads * n, static_cast<uint32_t>(n * 101 + heads * 7 + pass), -6.0f, 6.0f + 4 * pass);
          if (bits) {
            for (auto& x : s) {
              if (rng() % 4 == 0) {
                const uint32_t u = static_cast<uint32_t>(rng());
                std::memcpy(&x, &u, 4);
              }
            }
          }
          auto sa = s, sb = s;
          avx2::softmax_tile(sa.data(), heads, n, hd, pass == 0, pa.data());
          vnni::softmax_tile(sb.data(), heads, n, hd, pass == 0, pb.data());
          const std::string what = "n=" + std::to_string(n) + " heads=" + std::to_string(heads) +
                                   " pass=" + std::to_string(pass) + (bits ? " bits" : "");
          expect_same(sb, sa, "probabilities " + what);
          expect_same(pb, pa, "state " + what);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hz::kernels
