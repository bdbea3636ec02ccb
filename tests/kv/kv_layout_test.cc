#include "kv/kv_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace hz {
namespace {

// Llama-3-8B: 32 layers, 8 KV heads of 128.
const KvGeometry kLlama3{32, 2, 8, 128};
// DeepSeek-V3 MLA: 61 layers, one latent of 512 + 64.
const KvGeometry kDeepSeekV3{61, 1, 1, 576};

TEST(KvLayoutTest, PlainTypesAreTwoTimesLayersHeadsDimBytes) {
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kF32, 16), 2.0 * 32 * 8 * 128 * 4);
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kF16, 16), 131072.0);
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kBF16, 16), 131072.0);
  EXPECT_EQ(kv_block_bytes(kLlama3, KvType::kF16, 16), 131072u * 16);
}

TEST(KvLayoutTest, QuantizedTypesCarryTheirScales) {
  // fp8: one f32 scale per (plane, head): 8 * (16 * 128 + 4) bytes per plane, 64 planes.
  EXPECT_EQ(kv_plane_bytes(kLlama3, KvType::kFp8, 16), 8u * (16 * 128 + 4));
  EXPECT_EQ(kv_block_bytes(kLlama3, KvType::kFp8, 16), 64u * 16416);
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kFp8, 16), 65664.0);
  // int8: 128 bytes + 4 f16 scales (groups of 32) per head row.
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kInt8, 16), 2.0 * 32 * 8 * (128 + 8));
  // int4: 64 bytes + 4 f16 scales per head row.
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kInt4, 16), 2.0 * 32 * 8 * (64 + 8));
  // int4c: 64 bytes per head row + a scale and an offset byte per channel of each head per block.
  EXPECT_EQ(kv_plane_bytes(kLlama3, KvType::kInt4c, 16), 8u * (16 * 64 + 2 * 128));
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kInt4c, 16), 2.0 * 32 * 8 * (64 + 16));
  EXPECT_EQ(kv_bytes_per_token(kLlama3, KvType::kInt8c, 16), 2.0 * 32 * 8 * (128 + 16));
  // fp8 per-token bytes shrink with larger blocks (the scale is per block).
  EXPECT_LT(kv_bytes_per_token(kLlama3, KvType::kFp8, 256), kv_bytes_per_token(kLlama3, KvType::kFp8, 16));
}

TEST(KvLayoutTest, MlaStoresOneLatentPerLayer) {
  EXPECT_EQ(kv_bytes_per_token(kDeepSeekV3, KvType::kF16, 16), 61.0 * 576 * 2);
  EXPECT_EQ(kv_bytes_per_token(kDeepSeekV3, KvType::kInt8, 16), 61.0 * (576 + 18 * 2));
  EXPECT_EQ(kv_bytes_per_token(kDeepSeekV3, KvType::kInt4, 16), 61.0 * (288 + 18 * 2));
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(kDeepSeekV3, KvType::kFp8, 16), 61.0 * (16 * 576 + 4) / 16);
}

TEST(KvLayoutTest, SmallAndOddHeadDims) {
  KvGeometry tiny{5, 2, 4, 8};  // stories260K: head_dim 8 < 32 -> one group of 8
  EXPECT_EQ(kv_scale_group(8), 8u);
  EXPECT_EQ(kv_bytes_per_token(tiny, KvType::kInt8, 16), 2.0 * 5 * 4 * (8 + 2));
  EXPECT_EQ(kv_bytes_per_token(tiny, KvType::kInt4, 16), 2.0 * 5 * 4 * (4 + 2));
  KvGeometry odd{1, 1, 1, 80};  // head_dim 80: groups 32, 32, 16
  EXPECT_EQ(kv_plane_bytes(odd, KvType::kInt8, 1), 80u + 3 * 2);
  EXPECT_EQ(kv_plane_bytes(odd, KvType::kInt4, 1), 40u + 3 * 2);
  KvGeometry odd_c{1, 1, 1, 5};  // int4c rows pad to whole bytes: 3 bytes for 5 channels
  EXPECT_EQ(kv_plane_bytes(odd_c, KvType::kInt4c, 16), 16u * 3 + 2 * 5);
}

TEST(KvLayoutTest, SequencesHoldWholeBlocks) {
  uint64_t block = kv_block_bytes(kLlama3, KvType::kF16, 16);
  EXPECT_EQ(kv_bytes_for_tokens(kLlama3, KvType::kF16, 16, 0), 0u);
  EXPECT_EQ(kv_bytes_for_tokens(kLlama3, KvType::kF16, 16, 1), block);
  EXPECT_EQ(kv_bytes_for_tokens(kLlama3, KvType::kF16, 16, 16), block);
  EXPECT_EQ(kv_bytes_for_tokens(kLlama3, KvType::kF16, 16, 17), 2 * block);
}

TEST(KvLayoutTest, HotWindowSplitsPrecision) {
  KvPrecision p{KvType::kF16, 4096, KvType::kInt4};
  uint64_t hot = kv_bytes_for_tokens(kLlama3, KvType::kF16, 16, 4096);
  EXPECT_EQ(kv_bytes_for_tokens(kLlama3, p, 16, 1000), kv_bytes_for_tokens(kLlama3, KvType::kF16, 16, 1000));
  EXPECT_EQ(kv_bytes_for_tokens(kLlama3, p, 16, 4096 + 100), hot + kv_bytes_for_tokens(kLlama3, KvType::kInt4, 16, 100));
  EXPECT_EQ(kv_precision_name(p), "f16 (hot 4096) + int4");
}

TEST(KvLayoutTest, NamesRoundTrip) {
  for (KvType t : all_kv_types()) EXPECT_EQ(kv_type_from_name(kv_type_name(t)), t);
  EXPECT_EQ(kv_type_from_name("FP8_E4M3"), KvType::kFp8);
  EXPECT_FALSE(kv_type_from_name("q4_0").has_value());
}

TEST(KvLayoutTest, KeysAndValuesOfDifferentTypes) {
  // Llama-3-8B with K int8 and V int4: each layer one int8 plane and one int4 plane.
  const KvTypePair kv{KvType::kInt8, KvType::kInt4};
  EXPECT_EQ(kv_block_bytes(kLlama3, kv, 16),
            32 * (kv_plane_bytes(kLlama3, KvType::kInt8, 16) + kv_plane_bytes(kLlama3, KvType::kInt4, 16)));
  EXPECT_EQ(kv_block_bytes(kLlama3, KvTypePair{KvType::kInt8, KvType::kInt8}, 16), kv_block_bytes(kLlama3, KvType::kInt8, 16));
  EXPECT_EQ(kv_bytes_for_tokens(kLlama3, kv, 16, 17), 2 * kv_block_bytes(kLlama3, kv, 16));
  // MLA's one stream takes the keys' type.
  EXPECT_EQ(kv_block_bytes(kDeepSeekV3, kv, 16), kv_block_bytes(kDeepSeekV3, KvType::kInt8, 16));
  EXPECT_EQ(kv_type_pair_name(kv), "K int8 / V int4");
  EXPECT_EQ(kv_type_pair_name(KvTypePair{KvType::kF16, KvType::kF16}), "f16");
}

TEST(KvLayoutTest, TypePairCodesRoundTripAndNeverAliasASingleType) {
  std::vector<uint8_t> seen;
  for (KvType k : all_kv_types()) {
    for (KvType v : all_kv_types()) {
      const uint8_t code = kv_type_pair_code({k, v});
      if (k == v) EXPECT_EQ(code, static_cast<uint8_t>(k));  // the record byte of stores written before
      auto back = kv_type_pair_from_code(code);
      ASSERT_TRUE(back.has_value()) << int(code);
      EXPECT_EQ(*back, (KvTypePair{k, v}));
      EXPECT_EQ(std::count(seen.begin(), seen.end(), code), 0) << int(code);
      seen.push_back(code);
    }
  }
  EXPECT_FALSE(kv_type_pair_from_code(12).has_value());
  EXPECT_FALSE(kv_type_pair_from_code(16 + 17).has_value());  // k == v == 1 is spelled 1
  EXPECT_FALSE(kv_type_pair_from_code(255).has_value());
}

TEST(KvLayoutTest, CanonicalPrecisionDropsWhatChangesNothing) {
  KvPrecision p{KvType::kF16, 32, KvType::kF16};
  p.cold_v = KvType::kF16;
  p.sink_tokens = 4;
  EXPECT_EQ(kv_precision_name(p), "f16");
  EXPECT_FALSE(kv_canonical(p).mixed());
  EXPECT_EQ(kv_canonical(p).hot_window, 0u);
  KvPrecision q{KvType::kInt8, 0, KvType::kInt8, true};
  q.hot_v = KvType::kInt8;
  q.rotated_v = true;
  EXPECT_EQ(kv_precision_name(q), "int8 rotated");
  EXPECT_FALSE(kv_canonical(q).hot_v.has_value());
  EXPECT_FALSE(kv_canonical(q).rotated_v.has_value());
}

}  // namespace
}  // namespace hz
