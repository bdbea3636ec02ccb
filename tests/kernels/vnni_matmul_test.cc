// The AVX-512 VNNI Q4_0/Q8_0 matmuls against the AVX2 ones and the scalar reference, byte for byte
// (memcmp of whole output buffers, sentinels included): GGUF rows and packed layouts, token counts
// around the 32-token chunk, row ranges that are not multiples of 8, random and extreme inputs. Past
// 8 tokens the packed layout runs two groups per 512-bit register: ranges of 9-16 rows (a pair with
// a partial second group) and of 17-24 rows (a pair, then one group on the 256-bit kernel) are here.
// The AMX tile kernel (packed layout, every token count when called directly) where the CPU and OS
// offer AMX-INT8. Also the dispatch switches (force_vnni, force_amx) and that the ISA name does not
// change with them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels {
namespace {

constexpr float kSentinel = -12345.0f;

uint64_t block_bytes(DType type) { return type == DType::kQ4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0); }

// Sets the f16 scale of every block of a Q4_0/Q8_0 (or Q8_0 activation) buffer.
template <class ScaleFn>
void set_scales(std::vector<uint8_t>& buf, uint64_t bb, ScaleFn scale) {
  for (uint64_t b = 0; b < buf.size() / bb; ++b) {
    const uint16_t d = f32_to_f16(scale(b));
    std::memcpy(buf.data() + b * bb, &d, 2);
  }
}

// Quants straight from random bytes (every nibble, every int8 including -128 for Q8_0 weights).
std::vector<uint8_t> random_weight_bytes(DType type, int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(row_bytes(type, n) * rows);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  set_scales(w, block_bytes(type), [&](uint64_t) { return 0.01f + 0.001f * static_cast<float>(rng() % 100); });
  return w;
}

// Activations with quants in [-127, 127] (what the quantizer writes) from random bytes.
std::vector<uint8_t> random_activation_bytes(int64_t tokens, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> x(row_bytes(DType::kQ8_0, n) * tokens);
  for (auto& b : x) b = static_cast<uint8_t>(rng() % 255 + 129);  // 129..383 mod 256 = -127..127
  set_scales(x, sizeof(BlockQ8_0), [&](uint64_t) { return 0.02f + 0.001f * static_cast<float>(rng() % 50); });
  return x;
}

enum class Impl { kRef, kAvx2, kVnni, kAmx };
const char* impl_name(Impl i) {
  return i == Impl::kRef ? "ref" : i == Impl::kAvx2 ? "avx2" : i == Impl::kVnni ? "vnni" : "amx";
}

// y[t * stride + r] for r in [rb, re), sentinel elsewhere. Layout 0: GGUF rows and Q8_0 rows;
// layout 1: packed weights and packed activations (rb a multiple of 8).
std::vector<float> run(Impl impl, int layout, DType type, int64_t n, const std::vector<uint8_t>& w,
                       const std::vector<uint8_t>& packed, const std::vector<uint8_t>& x, const std::vector<uint8_t>& xp,
                       int64_t rb, int64_t re, int64_t tokens, int64_t stride) {
  const uint64_t wrb = row_bytes(type, n), xrb = row_bytes(DType::kQ8_0, n);
  std::vector<float> y(stride * tokens, kSentinel);
  if (impl == Impl::kRef) {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = rb; r < re; ++r) ref::vec_dot(type, n, w.data() + r * wrb, x.data() + t * xrb, &y[t * stride + r]);
    }
  } else if (layout == 1) {
    auto fn = impl == Impl::kAvx2 ? avx2::matmul_packed : impl == Impl::kAmx ? vnni::matmul_packed_amx : vnni::matmul_packed;
    fn(type, n, packed.data(), rb, re, xp.data(), tokens, y.data(), stride);
  } else if (impl == Impl::kAvx2) {
    avx2::matmul(type, n, w.data(), wrb, rb, re, x.data(), xrb, tokens, y.data(), stride);
  } else {
    auto fn = type == DType::kQ4_0 ? vnni::matmul_q4_0 : vnni::matmul_q8_0;
    fn(n, w.data(), wrb, rb, re, x.data(), xrb, tokens, y.data(), stride);
  }
  return y;
}

// All three implementations, both layouts, every token count and range: identical bytes.
void check_all(DType type, int64_t n, const std::vector<uint8_t>& w, int64_t rows, const std::vector<uint8_t>& x,
               const std::string& what) {
  const int64_t max_tokens = static_cast<int64_t>(x.size() / row_bytes(DType::kQ8_0, n));
  std::vector<uint8_t> packed(packed_bytes(type, rows, n));
  pack_weights(type, n, w.data(), row_bytes(type, n), rows, packed.data());
  const int64_t stride = rows + 3;
  // 1-8: the packed kernel's four-group path (registers); 16, 17: the AMX kernel's token halves.
  for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 32, 33, 70}) {
    if (tokens > max_tokens) continue;
    std::vector<uint8_t> xp(packed_activation_bytes(n, tokens));
    pack_activations(n, reinterpret_cast<const BlockQ8_0*>(x.data()), row_bytes(DType::kQ8_0, n), tokens, xp.data());
    for (int layout = 0; layout < 2; ++layout) {
      // Whole matrix, an odd row_end inside a group, a range inside one group.
      const std::pair<int64_t, int64_t> ranges[] = {{0, rows}, {layout ? 8 : 3, rows - 2}, {layout ? 0 : 1, 5}};
      for (auto [rb, re] : ranges) {
        if (re <= rb) continue;
        const auto want = run(Impl::kRef, layout, type, n, w, packed, x, xp, rb, re, tokens, stride);
        for (Impl impl : {Impl::kAvx2, Impl::kVnni, Impl::kAmx}) {
          if (impl == Impl::kAmx && (layout == 0 || !amx_supported())) continue;
          const auto got = run(impl, layout, type, n, w, packed, x, xp, rb, re, tokens, stride);
          if (std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0) continue;
          int64_t i = 0;
          while (std::memcmp(&got[i], &want[i], 4) == 0) ++i;
          FAIL() << what << " " << impl_name(impl) << (layout ? " packed" : " rows") << " n=" << n
                 << " tokens=" << tokens << " range=[" << rb << "," << re << ") first difference at t=" << i / stride
                 << " r=" << i % stride << ": " << got[i] << " vs ref " << want[i];
        }
      }
    }
  }
}

class VnniMatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(VnniMatmulTest, QuantizedRandomInputsMatchAvx2AndReference) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  const int64_t rows = 21;  // two full groups and a partial one
  for (int64_t n : {32, 64, 4096}) {
    const auto w = test::make_weights(type, rows, n, 31 + static_cast<uint32_t>(n));
    const auto x = test::make_activations(type, 70, n, 37 + static_cast<uint32_t>(n));
    check_all(type, n, w, rows, x, std::string(dtype_name(type)) + " quantized");
  }
}

// Enough rows for the packed kernel to take four groups (32 rows) at once with 1-8 tokens: 61 rows
// (two four-group units, the second ending in a partial group), 45 (one unit, then a pair), and
// the ranges of check_all inside them (from row 8: a unit whose last group is partial).
TEST_P(VnniMatmulTest, FourGroupsAtOnceMatchAvx2AndReference) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  for (int64_t rows : {61, 45}) {
    for (int64_t n : {32, 2048}) {
      const auto w = test::make_weights(type, rows, n, 41 + static_cast<uint32_t>(n + rows));
      const auto x = test::make_activations(type, 8, n, 43 + static_cast<uint32_t>(n));
      check_all(type, n, w, rows, x, std::string(dtype_name(type)) + " rows=" + std::to_string(rows));
    }
  }
}

TEST_P(VnniMatmulTest, RandomBytesMatchAvx2AndReference) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  const int64_t rows = 13;
  for (int64_t n : {32, 64, 4096}) {
    const auto w = random_weight_bytes(type, rows, n, 41 + static_cast<uint32_t>(n));
    const auto x = random_activation_bytes(33, n, 43 + static_cast<uint32_t>(n));
    check_all(type, n, w, rows, x, std::string(dtype_name(type)) + " random bytes");
  }
}

// Saturating patterns: all-max / all-min quants against +-127 activations, the largest and zero
// scales. Any lost term (Q4_0's 8*sum(x), Q8_0's bias) or int16 overflow shows up here.
TEST_P(VnniMatmulTest, ExtremeInputsMatchAvx2AndReference) {
  HZ_SKIP_WITHOUT_AVX512();
  const DType type = GetParam();
  const int64_t rows = 11, n = 128, tokens = 40;  // past 8 tokens: the 512-bit pair kernel too
  const uint64_t wrb = row_bytes(type, n), xrb = row_bytes(DType::kQ8_0, n), bb = block_bytes(type);
  std::vector<uint8_t> w(wrb * rows);
  const uint8_t patterns[] = {0xff, 0x00, 0x88, 0x7f, 0x80, 0x0f, 0xf0};  // Q4_0 nibbles 15/0/8...; Q8_0 -1/0/...
  for (int64_t r = 0; r < rows; ++r) std::memset(w.data() + r * wrb, patterns[r % 7], wrb);
  set_scales(w, bb, [](uint64_t b) { return b % 5 == 3 ? 0.0f : b % 5 == 4 ? 65504.0f : 1.0f; });
  std::vector<uint8_t> x(xrb * tokens);
  const int8_t xs[] = {127, -127, 1, 0};
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < n / kQK8_0; ++i) {
      auto* blk = reinterpret_cast<BlockQ8_0*>(x.data() + t * xrb) + i;
      for (int k = 0; k < kQK8_0; ++k) {
        blk->qs[k] = t < 4 ? xs[t] : (k + t + i) % 2 ? 127 : -127;  // uniform, then alternating signs
      }
    }
  }
  set_scales(x, sizeof(BlockQ8_0), [](uint64_t b) { return b % 3 == 1 ? 0.0f : b % 3 == 2 ? 65504.0f : 0.5f; });
  check_all(type, n, w, rows, x, std::string(dtype_name(type)) + " extreme");
}

// Through the public entry points: force_vnni switches the implementation, not the bits or the ISA name.
TEST_P(VnniMatmulTest, DispatchSwitchKeepsBitsAndIsaName) {
  const DType type = GetParam();
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks avx2";
  const bool before = vnni_enabled();
  const Isa isa_before = active_isa();
  force_isa(Isa::kAvx2);
  for (const int64_t tokens : {1, 9, 20}) {  // 20: the AMX table's tile kernel
    SCOPED_TRACE(tokens);
    const int64_t rows = 19, n = 256;
    const auto w = test::make_weights(type, rows, n, 61);
    const auto x = test::make_activations(type, tokens, n, 62);
    const uint64_t wrb = row_bytes(type, n), xrb = activation_row_bytes(type, n);
    std::vector<uint8_t> packed(packed_bytes(type, rows, n));
    pack_weights(type, n, w.data(), wrb, rows, packed.data());
    std::vector<uint8_t> xp(packed_activation_bytes(n, tokens));
    pack_activations(n, reinterpret_cast<const BlockQ8_0*>(x.data()), xrb, tokens, xp.data());
    auto both = [&] {
      std::vector<float> y(2 * rows * tokens);
      matmul(type, n, w.data(), wrb, 0, rows, x.data(), xrb, tokens, y.data(), rows);
      matmul_packed(type, n, packed.data(), 0, rows, xp.data(), tokens, y.data() + rows * tokens, rows);
      return y;
    };
    force_vnni(false);
    EXPECT_FALSE(vnni_enabled());
    const auto off = both();
    if (vnni_supported()) {
      force_vnni(true);
      EXPECT_TRUE(vnni_enabled());
      EXPECT_STREQ(isa_name(active_isa()), "avx2");
      const auto on = both();
      EXPECT_EQ(0, std::memcmp(on.data(), off.data(), on.size() * sizeof(float)));
      // 256-bit registers only: the same bits again.
      const bool wide_before = vnni_wide_enabled();
      force_vnni_wide(false);
      EXPECT_FALSE(vnni_wide_enabled());
      EXPECT_TRUE(vnni_enabled());
      const auto narrow = both();
      EXPECT_EQ(0, std::memcmp(narrow.data(), off.data(), narrow.size() * sizeof(float)));
      force_vnni_wide(wide_before);
      // A switch both ways: the same bits each time, then back as it was.
      auto both_ways = [&](void (*force)(bool), bool (*enabled)()) {
        const bool was = enabled();
        for (bool on : {true, false}) {
          force(on);
          EXPECT_EQ(on, enabled());
          EXPECT_EQ(0, std::memcmp(both().data(), off.data(), off.size() * sizeof(float)));
        }
        force(was);
      };
      both_ways(force_vnni_split, vnni_split_enabled);       // the per-call choice of the Zen 4 table
      if (amx_supported()) both_ways(force_amx, amx_enabled);  // the AMX tile kernel
    }
  }
  force_vnni(before);
  force_isa(isa_before);
}

INSTANTIATE_TEST_SUITE_P(Types, VnniMatmulTest, ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(VnniDispatchTest, OnByDefaultWhereSupported) {
  if (std::getenv("HORIZON_VNNI") != nullptr) GTEST_SKIP() << "HORIZON_VNNI is set";
  EXPECT_EQ(vnni_enabled(), vnni_supported());
}

TEST(VnniDispatchTest, AmxOnByDefaultWhereSupported) {
  if (std::getenv("HORIZON_AMX") != nullptr || std::getenv("HORIZON_VNNI") != nullptr) {
    GTEST_SKIP() << "HORIZON_AMX or HORIZON_VNNI is set";
  }
  EXPECT_EQ(amx_enabled(), amx_supported() && !vnni_split_enabled());
}

TEST(VnniDispatchTest, ForcingAmxOnWithoutSupportIsAProgrammerError) {
  if (amx_supported()) GTEST_SKIP() << "CPU and OS offer AMX-INT8";
  EXPECT_DEATH(force_amx(true), "force_amx");
}

TEST(VnniDispatchTest, ForcingOnWithoutSupportIsAProgrammerError) {
  if (vnni_supported()) GTEST_SKIP() << "CPU has VNNI";
  EXPECT_DEATH(force_vnni(true), "force_vnni");
}

}  // namespace
}  // namespace hz::kernels
