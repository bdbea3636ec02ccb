// KvOptions::validate: every feature interaction of the KV cache, decided in one place.
#include "kv/kv_options.h"

#include <gtest/gtest.h>

namespace hz {
namespace {

KvDemand demand() {
  KvDemand d;
  d.geometry.num_layers = 2;
  d.geometry.num_heads = 2;
  d.geometry.head_dim = 64;
  d.max_num_seqs = 4;
  d.max_model_len = 1024;
  d.prefill_chunk = 64;
  d.total_ram_bytes = uint64_t{16} << 30;
  return d;
}

bool has_warning(const KvPlan& p, const std::string& text) {
  for (const auto& w : p.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(KvOptionsTest, RejectsBadFieldsNamingTheFlag) {
  KvOptions o;
  o.block_tokens = 24;
  auto p = o.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--block-size 24"), std::string::npos);
  o.block_tokens = 16;
  o.hot_window = -1;
  p = o.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-hot-window"), std::string::npos);
}

TEST(KvOptionsTest, DefaultBudgetHoldsEverySequenceCappedAtAQuarterOfRam) {
  KvOptions o;
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  const uint64_t block = kv_block_bytes(demand().geometry, KvType::kF16, 16);
  EXPECT_EQ(p->block_bytes, block);
  EXPECT_EQ(p->budget_bytes, 4 * (1024 / 16) * block);
  EXPECT_EQ(p->num_blocks, 4 * 1024 / 16);
  KvDemand small = demand();
  small.total_ram_bytes = 64 * block;
  p = o.validate(small);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_blocks, 16);
}

TEST(KvOptionsTest, BudgetThatHoldsNoBlockIsAnError) {
  KvOptions o;
  o.budget_bytes = 100;
  auto p = o.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-budget"), std::string::npos);
}

// A budget that holds less than one whole context is allowed (shorter requests run) but said.
TEST(KvOptionsTest, BudgetBelowOneContextWarns) {
  KvOptions o;
  const uint64_t block = kv_block_bytes(demand().geometry, KvType::kF16, 16);
  o.budget_bytes = 10 * block;  // 160 tokens of the 1024 a sequence may take
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(has_warning(*p, "--kv-budget holds 160 tokens, less than one sequence of --max-model-len 1024"));
  o.budget_bytes = 64 * block;  // a whole context: no warning
  p = o.validate(demand());
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(has_warning(*p, "less than one sequence"));
}

TEST(KvOptionsTest, WindowWhoseTypesMatchIsDropped) {
  KvOptions o;
  o.hot_type = o.cold_type = KvType::kInt8;
  o.hot_window = 64;
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->precision.hot_window, 0u);
  EXPECT_EQ(p->hot_blocks, 0);
}

TEST(KvOptionsTest, DiskDirImpliesPrefixCachingAndAPrefixStore) {
  KvOptions o;
  o.disk_dir = "/tmp/kv";
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->prefix_store);
  EXPECT_TRUE(p->prefix_caching);
  EXPECT_TRUE(p->far_tier);
  EXPECT_TRUE(p->warnings.empty());
}

TEST(KvOptionsTest, HotWindowTurnsThePrefixStoreOffWithAWarning) {
  KvOptions o;
  o.disk_dir = "/tmp/kv";
  o.hot_type = KvType::kF16;
  o.cold_type = KvType::kInt4;
  o.hot_window = 64;
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->prefix_store);
  EXPECT_FALSE(p->prefix_caching);
  EXPECT_TRUE(p->far_tier) << "the far tier works with any KV types";
  EXPECT_TRUE(has_warning(*p, "the prefix store is off"));
  // The arena holds the cold type.
  EXPECT_EQ(p->block_bytes, kv_block_bytes(demand().geometry, KvType::kInt4, 16));
}

TEST(KvOptionsTest, PrefixCachingWithAHotWindowRetainsStagingOutOfTheBudget) {
  KvOptions o;
  o.prefix_caching = true;
  o.hot_type = KvType::kF16;
  o.cold_type = KvType::kInt8;
  o.hot_window = 64;  // a query at p reads [p - 63, p]: up to 4 blocks besides its own
  const KvDemand d = demand();
  const uint64_t staging = kv_block_bytes(d.geometry, KvType::kF16, 16);
  const uint64_t block = kv_block_bytes(d.geometry, KvType::kInt8, 16);
  o.budget_bytes = 1000 * block;
  auto p = o.validate(d);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hot_blocks, 4);
  EXPECT_EQ(p->retained_blocks, 4 * (4 + 1) * 4);
  EXPECT_EQ(p->num_blocks, static_cast<int32_t>((o.budget_bytes - 80 * staging) / block));
  // Retention takes at most a quarter of the budget.
  o.budget_bytes = 100 * block;
  p = o.validate(d);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->retained_blocks, static_cast<int32_t>(o.budget_bytes / 4 / staging));
  // Without prefix caching nothing is retained.
  o.prefix_caching = false;
  p = o.validate(d);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->retained_blocks, 0);
  EXPECT_EQ(p->num_blocks, 100);
}

TEST(KvOptionsTest, FarTierNeedsAPoolThatHoldsOneRunningSequence) {
  KvOptions o;
  o.disk_dir = "/tmp/kv";
  const KvDemand d = demand();  // a prefill chunk of 64 tokens: 4 blocks, + 2
  const uint64_t block = kv_block_bytes(d.geometry, KvType::kF16, 16);
  o.budget_bytes = 6 * block;
  auto p = o.validate(d);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->far_tier);
  o.budget_bytes = 5 * block;
  p = o.validate(d);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->far_tier);
  EXPECT_TRUE(has_warning(*p, "KV far tier off"));
  // A pool that holds every sequence's whole context loses nothing without the far tier: no
  // warning then.
  KvDemand short_context = d;
  short_context.max_num_seqs = 1;
  short_context.max_model_len = 80;  // the pool's 5 blocks
  p = o.validate(short_context);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->far_tier);
  EXPECT_FALSE(has_warning(*p, "KV far tier off"));
  short_context.max_model_len = 81;
  p = o.validate(short_context);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(has_warning(*p, "KV far tier off"));
  short_context.max_model_len = 80;
  short_context.max_num_seqs = 2;
  p = o.validate(short_context);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(has_warning(*p, "KV far tier off"));
  // Its hot window counts too: 6 blocks hold a chunk and a partial block, not one more hot block.
  const uint64_t int8_block = kv_block_bytes(d.geometry, KvType::kInt8, 16);
  o.budget_bytes = 6 * int8_block;
  o.hot_type = o.cold_type = KvType::kInt8;
  p = o.validate(d);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_blocks, 6);
  EXPECT_TRUE(p->far_tier);
  o.hot_type = KvType::kF16;
  o.hot_window = 17;
  p = o.validate(d);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_blocks, 6);
  EXPECT_FALSE(p->far_tier);
}

}  // namespace
}  // namespace hz

namespace hz {
namespace {

TEST(KvOptionsTest, RotationAutoIsOnForIntegerTypesOnly) {
  auto rotated = [](KvType hot, int32_t window, KvType cold, KvRotationMode mode) {
    KvOptions o;
    o.hot_type = hot;
    o.hot_window = window;
    o.cold_type = cold;
    o.rotation = mode;
    auto p = o.validate(demand());
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() && p->precision.rotated;
  };
  const auto kAuto = KvRotationMode::kAuto;
  EXPECT_FALSE(rotated(KvType::kF16, 0, KvType::kF16, kAuto));
  EXPECT_FALSE(rotated(KvType::kFp8, 0, KvType::kFp8, kAuto));
  EXPECT_TRUE(rotated(KvType::kInt8, 0, KvType::kInt8, kAuto));
  EXPECT_TRUE(rotated(KvType::kInt4, 0, KvType::kInt4, kAuto));
  EXPECT_TRUE(rotated(KvType::kF16, 32, KvType::kInt4, kAuto));
  EXPECT_FALSE(rotated(KvType::kF16, 32, KvType::kFp8, kAuto));
  // A window dropped (matching types) leaves the hot type alone to decide.
  EXPECT_FALSE(rotated(KvType::kF16, 0, KvType::kInt4, kAuto));
  EXPECT_FALSE(rotated(KvType::kInt4, 0, KvType::kInt4, KvRotationMode::kOff));
  // int4c / int3 / int2 scale per channel, which rotation only hurts (measured): off unless asked.
  EXPECT_FALSE(rotated(KvType::kInt4c, 0, KvType::kInt4c, kAuto));
  EXPECT_FALSE(rotated(KvType::kInt8c, 0, KvType::kInt8c, kAuto));
  EXPECT_FALSE(rotated(KvType::kF16, 32, KvType::kInt4c, kAuto));
  EXPECT_FALSE(rotated(KvType::kF16, 32, KvType::kInt2, kAuto));
  EXPECT_FALSE(rotated(KvType::kF16, 32, KvType::kInt3, kAuto));
  EXPECT_TRUE(rotated(KvType::kF16, 32, KvType::kInt2, KvRotationMode::kOn));
  EXPECT_TRUE(rotated(KvType::kF16, 0, KvType::kF16, KvRotationMode::kOn));
}

TEST(KvOptionsTest, RotationIsPartOfThePrecisionNameThatKeysStoredKv) {
  // The name feeds the disk and remote fingerprints and the prefix-cache identity.
  KvPrecision p{KvType::kInt4, 0, KvType::kInt4};
  EXPECT_EQ(kv_precision_name(p), "int4");  // unchanged without rotation: existing stores stay valid
  p.rotated = true;
  EXPECT_EQ(kv_precision_name(p), "int4 rotated");
  KvPrecision w{KvType::kF16, 64, KvType::kInt8, true};
  EXPECT_EQ(kv_precision_name(w), "f16 (hot 64) + int8 rotated");
}

TEST(KvOptionsTest, RotationFlagParsesAndNamesItselfInErrors) {
  EXPECT_EQ(*parse_kv_rotation("on", "--kv-rotation"), KvRotationMode::kOn);
  EXPECT_EQ(*parse_kv_rotation("off", "--kv-rotation"), KvRotationMode::kOff);
  EXPECT_EQ(*parse_kv_rotation("auto", "--kv-rotation"), KvRotationMode::kAuto);
  auto bad = parse_kv_rotation("yes", "--kv-rotation");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--kv-rotation 'yes'"), std::string::npos);
}


// int4c (per-channel scales, like int3 / int2) holds every position: alone, as a cold type, on disk.
TEST(KvOptionsTest, PerChannelInt4IsUsableAloneAndCold) {
  KvOptions o;
  o.hot_type = KvType::kInt4c;
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->precision.hot, KvType::kInt4c);
  EXPECT_EQ(p->block_bytes, kv_block_bytes(demand().geometry, KvType::kInt4c, 16));
  // 4 + 16 / 16 bits per value with 16-token blocks (int4 at head dim 64: 4.5).
  EXPECT_EQ(kv_bytes_per_token(demand().geometry, KvType::kInt4c, 16) * 8 / (2.0 * 2 * 2 * 64), 5.0);
  EXPECT_EQ(kv_type_from_name("INT4C"), KvType::kInt4c);
  o.hot_type = KvType::kInt8c;  // 8 + 16 / 16 bits
  p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(kv_bytes_per_token(demand().geometry, KvType::kInt8c, 16) * 8 / (2.0 * 2 * 2 * 64), 9.0);
  o.hot_type = KvType::kF16;
  o.hot_window = 32;
  o.cold_type = KvType::kInt4c;
  o.disk_type = KvType::kInt4c;
  p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(kv_precision_name(p->precision), "f16 (hot 32) + int4c");
}

// int3 / int2 are too lossy for every position: only the cold type under a hot window.
TEST(KvOptionsTest, LowBitTypesOnlyAsTheColdTypeUnderAWindow) {
  for (KvType t : {KvType::kInt3, KvType::kInt2}) {
    KvOptions o;
    o.hot_type = t;
    auto p = o.validate(demand());
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find(std::string("--kv-cache-dtype ") + kv_type_name(t)), std::string::npos)
        << p.status().message();
    EXPECT_NE(p.status().message().find("--kv-cold-dtype"), std::string::npos);
    o.hot_window = 32;  // still the hot type: refused
    EXPECT_FALSE(o.validate(demand()).ok());
    o.hot_type = KvType::kF16;
    o.cold_type = t;
    p = o.validate(demand());
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->precision.cold, t);
    // The arena holds the cold type: 2 + 16 / 16 and 3 + 16 / 16 bits per value with 16-token blocks.
    EXPECT_EQ(p->block_bytes, kv_block_bytes(demand().geometry, t, 16));
    EXPECT_EQ(kv_bytes_per_token(demand().geometry, t, 16) * 8 / (2.0 * 2 * 2 * 64), t == KvType::kInt2 ? 3.0 : 4.0);
    o.disk_type = t;  // a disk copy of a whole cache in int3 / int2: refused
    p = o.validate(demand());
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("--kv-disk-dtype"), std::string::npos);
    EXPECT_TRUE(o.check_types().code() == p.status().code());  // the same check, without a demand
  }
}

TEST(KvOptionsTest, SinkTokensNeedAHotWindowWithAColdType) {
  KvOptions o;
  o.sink_tokens = 4;  // no window: every position is in one type, so sinks would do nothing
  auto p = o.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-sink-tokens 4"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("--kv-hot-window"), std::string::npos);
  o.hot_window = 32;
  o.cold_type = KvType::kF16;  // a window over the same type is dropped: refused too
  EXPECT_FALSE(o.validate(demand()).ok());
  o.cold_type = KvType::kInt2;
  o.sink_tokens = -1;
  p = o.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-sink-tokens must be 0 or more"), std::string::npos);
  o.sink_tokens = 4;
  p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->precision.sink_tokens, 4u);
  EXPECT_EQ(p->sink_blocks, 1);  // whole blocks: positions 0-15
  EXPECT_EQ(kv_precision_name(p->precision), "f16 (hot 32, sinks 4) + int2");
  o.sink_tokens = 17;
  p = o.validate(demand());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sink_blocks, 2);
}

TEST(KvOptionsTest, SinkBlocksComeOutOfTheBudget) {
  KvOptions o;
  o.hot_window = 32;
  o.cold_type = KvType::kInt2;
  o.budget_bytes = uint64_t{1} << 20;
  auto without = o.validate(demand());
  ASSERT_TRUE(without.ok());
  o.sink_tokens = 32;  // 2 blocks per sequence, 4 sequences, staged in f16
  auto with = o.validate(demand());
  ASSERT_TRUE(with.ok());
  const uint64_t staged = 2 * 4 * kv_block_bytes(demand().geometry, KvType::kF16, 16);
  EXPECT_EQ(with->num_blocks, static_cast<int32_t>(((uint64_t{1} << 20) - staged) / with->block_bytes));
  EXPECT_LT(with->num_blocks, without->num_blocks);
  o.budget_bytes = staged;  // nothing left for the pool
  auto none = o.validate(demand());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("--kv-budget"), std::string::npos);
}

TEST(KvOptionsTest, SinksArePartOfThePrecisionNameAndTheBytesPerToken) {
  KvPrecision p{KvType::kF16, 32, KvType::kInt2};
  const std::string plain = kv_precision_name(p);
  p.sink_tokens = 4;
  EXPECT_NE(kv_precision_name(p), plain);  // a different fingerprint: sink blocks keep the hot form
  KvGeometry g{2, 2, 2, 64};
  // 256 tokens: 32 hot, one 16-token sink block hot, 208 cold.
  EXPECT_EQ(kv_bytes_for_tokens(g, p, 16, 256), kv_bytes_for_tokens(g, KvType::kF16, 16, 48) +
                                                     kv_bytes_for_tokens(g, KvType::kInt2, 16, 208));
  EXPECT_EQ(kv_sink_blocks(p, 16), 1u);
  p.hot_window = 0;  // no window: no sinks
  EXPECT_EQ(kv_sink_blocks(p, 16), 0u);
}

}  // namespace
}  // namespace hz

namespace hz {
namespace {

// Separate key and value types: their own plane sizes, names, rotation and checks.
KvOptions split_options(KvType k, KvType v) {
  KvOptions o;
  o.hot_type = k;
  o.hot_type_v = v;
  return o;
}

TEST(KvOptionsTest, KeysAndValuesTakeTheirOwnTypesAndPlaneSizes) {
  const KvGeometry g = demand().geometry;
  auto p = split_options(KvType::kInt8c, KvType::kInt4c).validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->precision.hot_types(), (KvTypePair{KvType::kInt8c, KvType::kInt4c}));
  EXPECT_EQ(p->block_bytes, g.num_layers * (kv_plane_bytes(g, KvType::kInt8c, 16) + kv_plane_bytes(g, KvType::kInt4c, 16)));
  EXPECT_LT(p->block_bytes, kv_block_bytes(g, KvType::kInt8c, 16));
  EXPECT_GT(p->block_bytes, kv_block_bytes(g, KvType::kInt4c, 16));
  EXPECT_EQ(kv_precision_name(p->precision), "K int8c / V int4c");
  // The same type given twice is the plain precision: the same name, so the same stored KV.
  auto same = split_options(KvType::kInt8, KvType::kInt8).validate(demand());
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->precision.hot_v.has_value());
  EXPECT_EQ(kv_precision_name(same->precision), "int8 rotated");
}

TEST(KvOptionsTest, ColdKeysAndValuesUnderAWindowWithSinks) {
  KvOptions o;
  o.hot_window = 32;
  o.cold_type = KvType::kInt3;
  o.cold_type_v = KvType::kInt2;
  o.sink_tokens = 4;
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->precision.arena_types(), (KvTypePair{KvType::kInt3, KvType::kInt2}));
  EXPECT_EQ(kv_precision_name(p->precision), "f16 (hot 32, sinks 4) + K int3 / V int2");
  EXPECT_EQ(p->sink_blocks, 1);
  // Bytes per token of a long sequence: the cold part in K int3 + V int2 (4 + 3 bits per value).
  const KvGeometry g = demand().geometry;
  const uint64_t n = 1024;
  const uint64_t cold = kv_bytes_for_tokens(g, KvTypePair{KvType::kInt3, KvType::kInt2}, 16, n - 32 - 16);
  EXPECT_EQ(kv_bytes_for_tokens(g, p->precision, 16, n), kv_bytes_for_tokens(g, KvType::kF16, 16, 48) + cold);
  // A cold value type alone differing from the hot ones is a window too.
  KvOptions v_only;
  v_only.hot_window = 32;
  v_only.cold_type = KvType::kF16;
  v_only.cold_type_v = KvType::kInt4c;
  auto pv = v_only.validate(demand());
  ASSERT_TRUE(pv.ok()) << pv.status().message();
  EXPECT_TRUE(pv->precision.mixed());
  EXPECT_EQ(kv_precision_name(pv->precision), "f16 (hot 32) + K f16 / V int4c");
}

TEST(KvOptionsTest, RotationAutoDecidesPerStream) {
  KvOptions o = split_options(KvType::kInt4c, KvType::kInt4);
  auto p = o.validate(demand());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->precision.rotated_stream(0)) << "per-channel keys: rotation measured worse";
  EXPECT_TRUE(p->precision.rotated_stream(1)) << "per-row values: rotation helps";
  EXPECT_EQ(kv_precision_name(p->precision), "K int4c / V int4 (V rotated)");
  o.rotation = KvRotationMode::kOn;
  p = o.validate(demand());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(kv_precision_name(p->precision), "K int4c / V int4 rotated");
  o = split_options(KvType::kInt8, KvType::kF16);
  p = o.validate(demand());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(kv_precision_name(p->precision), "K int8 / V f16 (K rotated)");
}

TEST(KvOptionsTest, SplitTypesAreCheckedPerStreamNamingTheFlag) {
  auto p = split_options(KvType::kF16, KvType::kInt2).validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-cache-dtype-v int2"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("--kv-cold-dtype-v int2"), std::string::npos) << p.status().message();
  KvOptions k = split_options(KvType::kInt3, KvType::kF16);
  p = k.validate(demand());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-cache-dtype-k int3"), std::string::npos) << p.status().message();
  // MLA stores one latent stream: a value type has nothing to apply to.
  KvDemand mla = demand();
  mla.geometry.num_streams = 1;
  p = split_options(KvType::kInt8, KvType::kInt4).validate(mla);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("MLA"), std::string::npos);
  // Sinks need a cold type that differs from the hot ones in K or V.
  KvOptions s;
  s.hot_window = 32;
  s.cold_type = KvType::kF16;
  s.cold_type_v = KvType::kInt2;
  s.sink_tokens = 4;
  EXPECT_TRUE(s.validate(demand()).ok());
}

}  // namespace
}  // namespace hz
