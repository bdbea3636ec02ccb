// CUDA KV encoders/decoders bit for bit against the scalar codecs (kernels/ref/kv_codec.cc): random
// rows of several head dims, and the rounding edge cases (ties to even for f16/bf16/fp8, halves
// away from zero for int8, int4's truncation), NaN/Inf where the codec defines them. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kv_codec.h"
#include "kernels/ref/ref_kernels.h"
#include "support/gpu_test.h"

namespace hz {
namespace {

using kernels::KvCodec;
using test::DeviceArray;
using test::float_bits;

const char* codec_name(KvCodec c) {
  switch (c) {
    case KvCodec::kF32: return "f32";
    case KvCodec::kF16: return "f16";
    case KvCodec::kBF16: return "bf16";
    case KvCodec::kFp8: return "fp8";
    case KvCodec::kInt8: return "int8";
    case KvCodec::kInt4: return "int4";
    case KvCodec::kInt4c: return "int4c";
    case KvCodec::kInt8c: return "int8c";
    case KvCodec::kInt3: return "int3";
    case KvCodec::kInt2: return "int2";
  }
  return "?";
}

// Encodes on both sides, compares bytes; decodes the reference bytes on both sides, compares bits.
void check_round_trip(const device::Stream& s, KvCodec c, const std::vector<float>& x, int64_t rows, int64_t hd) {
  SCOPED_TRACE(testing::Message() << codec_name(c) << " rows=" << rows << " head_dim=" << hd);
  const int64_t eb = kernels::kv_row_elem_bytes(c, hd) * rows;
  const int64_t sb = c == KvCodec::kFp8 ? 4 : kernels::kv_row_scale_bytes(c, hd) * rows;
  std::vector<uint8_t> ref_e(eb), ref_s(std::max<int64_t>(sb, 1));
  kernels::ref::encode_kv_rows(c, x.data(), rows, hd, ref_e.data(), ref_s.data());
  DeviceArray<float> dx(s, x);
  DeviceArray<uint8_t> de(s, static_cast<size_t>(eb)), ds(s, ref_s.size());
  Status st = cuda::encode_kv_rows(c, dx.data(), rows, hd, de.data(), ds.data(), s);
  ASSERT_TRUE(st.ok()) << st.message();
  const auto got_e = de.read(), got_s = ds.read();
  for (int64_t i = 0; i < eb; ++i) ASSERT_EQ(got_e[i], ref_e[i]) << "element byte " << i << " (x = " << x[i * rows * hd / eb] << ")";
  for (int64_t i = 0; i < sb; ++i) ASSERT_EQ(got_s[i], ref_s[i]) << "scale byte " << i;

  std::vector<float> ref_y(rows * hd);
  kernels::ref::decode_kv_rows(c, ref_e.data(), ref_s.data(), rows, hd, ref_y.data());
  DeviceArray<uint8_t> re(s, ref_e), rs(s, ref_s);
  DeviceArray<float> dy(s, static_cast<size_t>(rows * hd));
  ASSERT_TRUE(cuda::decode_kv_rows(c, re.data(), rs.data(), rows, hd, dy.data(), s).ok());
  const auto got_y = dy.read();
  for (int64_t i = 0; i < rows * hd; ++i) {
    if (std::isnan(ref_y[i])) {
      ASSERT_TRUE(std::isnan(got_y[i])) << "decoded " << i;
    } else {
      ASSERT_EQ(float_bits(got_y[i]), float_bits(ref_y[i])) << "decoded " << i;
    }
  }
}

const std::vector<KvCodec> kCodecs = {KvCodec::kF32, KvCodec::kF16, KvCodec::kBF16, KvCodec::kFp8, KvCodec::kInt8, KvCodec::kInt4};

TEST(CudaKvCodecTest, RandomRowsMatchReferenceBitForBit) {
  HZ_REQUIRE_GPU();
  auto s = device::Stream::create();
  ASSERT_TRUE(s.ok());
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (KvCodec c : kCodecs) {
    for (int64_t hd : {8, 20, 33, 64, 96, 128, 256}) {
      for (int64_t rows : {1, 5, 16}) {
        std::vector<float> x(rows * hd);
        for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * (i % 7 == 0 ? 30.0f : 1.0f);
        check_round_trip(*s, c, x, rows, hd);
      }
    }
  }
}

TEST(CudaKvCodecTest, RoundingTiesAndSpecialValuesMatchReference) {
  HZ_REQUIRE_GPU();
  auto s = device::Stream::create();
  ASSERT_TRUE(s.ok());
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // f16 / bf16: exact halfway points (to even both ways), subnormal halves, the overflow edge, NaN, Inf.
  const std::vector<float> f16_edges = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-25f, 3 * 0x1p-25f, 0x1p-24f * 1.5f,
                                        65504.0f, 65519.99f, 65520.0f, -65520.0f, inf, -inf, nan, -0.0f, 0.0f,
                                        1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1.fffffep127f, 1e-45f};
  for (KvCodec c : {KvCodec::kF16, KvCodec::kBF16, KvCodec::kF32}) check_round_trip(*s, c, f16_edges, 1, static_cast<int64_t>(f16_edges.size()));
  // fp8: amax 448 makes the scale exactly 1, so these hit E4M3's own ties: 1.0625 (-> 1.0), 1.1875
  // (-> 1.25), subnormal halves 2^-10 (-> 0) and 3 * 2^-10 (-> 2^-8), the top 448 and 464.
  std::vector<float> fp8 = {448.0f, 1.0625f, 1.1875f, -1.0625f, 0x1p-10f, 3 * 0x1p-10f, 0.015625f, 0.0146484375f,
                            240.0f, 232.0f, 0.0f, -0.0f, 7 * 0x1p-10f, 1.5f, -448.0f, 300.0f};
  check_round_trip(*s, KvCodec::kFp8, fp8, 1, static_cast<int64_t>(fp8.size()));
  fp8[3] = nan;  // a NaN is skipped by the max and encodes as 0x7f
  check_round_trip(*s, KvCodec::kFp8, fp8, 2, 8);
  // int8: amax 127 gives d = 1, so x * id = x: halves round away from zero.
  std::vector<float> i8 = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 126.5f, -126.5f, 3.49999f, 0.0f, -0.0f, 1.5f, -1.5f};
  i8.resize(32, 0.25f);
  check_round_trip(*s, KvCodec::kInt8, i8, 1, 32);
  // int4: the largest magnitude (first of equals) maps to -8; +8.5 then truncation.
  std::vector<float> i4 = {-8.0f, 8.0f, 0.5f, -0.5f, 1.5f, -7.5f, 7.5f, 3.0f, 0.0f, 2.49f, -2.5f, 6.5f};
  i4.resize(32, -0.5f);
  check_round_trip(*s, KvCodec::kInt4, i4, 1, 32);
  check_round_trip(*s, KvCodec::kInt4, std::vector<float>(33, 0.0f), 1, 33);  // all zero, odd head_dim
  check_round_trip(*s, KvCodec::kInt8, std::vector<float>(40, 0.0f), 1, 40);
}

}  // namespace
}  // namespace hz
