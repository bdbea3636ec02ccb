// KvReadTable: each query reads each block in the form the position rule gives — its own block
// exactly, its hot window hot, older blocks cold — from where that form lives (staging copy,
// arena, far tier mapping); forms the cache does not hold are encoded with the commit encoder;
// far blocks are checked against their checksums when the table is bound to a layer.
#include "kv/kv_read_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "tensor/dtype.h"

namespace hz {
namespace {

constexpr int32_t kLayers = 2, kHeads = 2, kHd = 32, kBt = 16;

struct Cache {
  std::unique_ptr<KvCache> kv;
  std::vector<BlockRef> table;
};

// `n` positions of random rows in every layer; layers [0, sealed_layers) sealed over them.
Cache make_cache(KvPrecision p, int32_t n, int32_t sealed_layers) {
  KvCacheConfig c;
  c.num_layers = kLayers;
  c.num_kv_heads = kHeads;
  c.head_dim = kHd;
  c.block_tokens = kBt;
  c.num_blocks = 8;
  c.precision = p;
  Cache out;
  out.kv = std::make_unique<KvCache>(c);
  EXPECT_TRUE(out.kv->pool().allocate_n((n + kBt - 1) / kBt, &out.table));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int32_t pos = 0; pos < n; ++pos) {
    for (int32_t l = 0; l < kLayers; ++l) {
      for (int32_t st = 0; st < 2; ++st) {
        for (int32_t h = 0; h < kHeads; ++h) {
          auto* row = reinterpret_cast<uint16_t*>(out.kv->write_row(out.table[pos / kBt], l, st, h, pos % kBt));
          for (int32_t i = 0; i < kHd; ++i) row[i] = f32_to_f16(nd(rng));
        }
      }
    }
  }
  for (int32_t l = 0; l < sealed_layers; ++l) out.kv->seal_layer(l, out.table.data(), 0, n);
  return out;
}

uint64_t row_bytes(kernels::KvCodec c) { return static_cast<uint64_t>(kernels::kv_row_elem_bytes(c, kHd)); }
uint64_t scale_bytes(kernels::KvCodec c) { return static_cast<uint64_t>(kernels::kv_row_scale_bytes(c, kHd)); }

TEST(KvReadTableTest, TilesComeFromWhereThePositionRuleSays) {
  // Hot window 32 in f16 (the staging type), cold int4; queries at [70, 80) of 80 positions.
  Cache c = make_cache(KvPrecision{KvType::kF16, 32, KvType::kInt4}, 80, kLayers);
  const KvCache& kv = *c.kv;
  KvReadTable t;
  t.reset(kv, c.table.data(), 70, 80);
  t.bind_layer(1);
  const int32_t h = 1, slot = 3;
  const uint64_t exact = row_bytes(kernels::KvCodec::kF16);
  // Query 75: block 4 holds it (exact), block 3 ends at 64 > 75 - 32 + 1 (hot), block 1 is cold.
  KvTile own = t.tile(h, 75, 4 * kBt + slot, 4);
  EXPECT_EQ(own.k_codec, kernels::KvCodec::kF16);
  EXPECT_EQ(own.v_codec, kernels::KvCodec::kF16);
  EXPECT_EQ(own.k, kv.exact_plane(c.table[4].idx, 1, 0) + (h * kBt + slot) * exact);
  EXPECT_EQ(own.v, kv.exact_plane(c.table[4].idx, 1, 1) + (h * kBt + slot) * exact);
  EXPECT_EQ(own.ks, nullptr);
  KvTile hot = t.tile(h, 75, 3 * kBt + slot, 4);
  EXPECT_EQ(hot.k_codec, kernels::KvCodec::kF16);
  EXPECT_EQ(hot.k, kv.exact_plane(c.table[3].idx, 1, 0) + (h * kBt + slot) * exact);
  const kernels::KvCodec i4 = kernels::KvCodec::kInt4;
  KvTile cold = t.tile(h, 75, 1 * kBt + slot, 4);
  EXPECT_EQ(cold.k_codec, i4);
  EXPECT_EQ(cold.v_codec, i4);
  EXPECT_EQ(cold.k, kv.plane(c.table[1], 1, 0) + kv.head_elem_offset(i4, h) + slot * row_bytes(i4));
  EXPECT_EQ(cold.vs, kv.plane(c.table[1], 1, 1) + kv.head_scale_offset(i4, h) + slot * scale_bytes(i4));
  EXPECT_EQ(cold.bytes, 4 * row_bytes(i4));
  // Block 2 ([32, 48)) is hot for query 70 (48 > 39) and cold for query 79 (48 <= 48).
  EXPECT_EQ(t.tile(h, 70, 2 * kBt, 16).k_codec, kernels::KvCodec::kF16);
  EXPECT_EQ(t.tile(h, 79, 2 * kBt, 16).k_codec, i4);
}

TEST(KvReadTableTest, FormsTheCacheDoesNotHoldAreEncodedByTheCommitEncoder) {
  // Hot int8 (not the staging type) and cold int4; layer 1 is not sealed yet, so its cold reads
  // need the arena form encoded from staging as well.
  Cache c = make_cache(KvPrecision{KvType::kInt8, 32, KvType::kInt4}, 80, 1);
  const KvCache& kv = *c.kv;
  KvReadTable t;
  t.reset(kv, c.table.data(), 75, 80);
  t.bind_layer(1);
  std::vector<float> tmp(kBt * kHd);
  for (auto [block, codec] : {std::pair{3, kernels::KvCodec::kInt8}, std::pair{1, kernels::KvCodec::kInt4}}) {
    std::vector<uint8_t> want(kv.plane_bytes_for(codec));
    for (int32_t st = 0; st < 2; ++st) {
      for (int32_t h = 0; h < kHeads; ++h) {
        kv.encode_head(codec, c.table[block].idx, 1, st, h, tmp.data(), want.data());
        const int32_t slot = 5;
        KvTile got = t.tile(h, 77, block * kBt + slot, 8);
        ASSERT_EQ(got.k_codec, codec);
        ASSERT_EQ(got.v_codec, codec);
        const uint8_t* want_rows = want.data() + kv.head_elem_offset(codec, h) + slot * row_bytes(codec);
        const uint8_t* want_scales = want.data() + kv.head_scale_offset(codec, h) + slot * scale_bytes(codec);
        EXPECT_EQ(0, std::memcmp(st == 0 ? got.k : got.v, want_rows, 8 * row_bytes(codec))) << block << " " << st << " " << h;
        EXPECT_EQ(0, std::memcmp(st == 0 ? got.ks : got.vs, want_scales, 8 * scale_bytes(codec))) << block;
      }
    }
  }
}

// Keys and values of different types: each stream's tiles point into its own plane (its own
// size, so V's plane starts after K's) with its own codec, strides and scales, hot and cold.
TEST(KvReadTableTest, KeysAndValuesOfDifferentTypesReadTheirOwnPlanes) {
  KvPrecision p;
  p.hot = KvType::kInt8;
  p.hot_v = KvType::kF16;
  p.hot_window = 32;
  p.cold = KvType::kInt4c;
  p.cold_v = KvType::kInt2;
  Cache c = make_cache(p, 80, 1);
  const KvCache& kv = *c.kv;
  EXPECT_EQ(kv.arena_types(), (KvTypePair{KvType::kInt4c, KvType::kInt2}));
  EXPECT_EQ(kv.layer_bytes(), kv.plane_bytes_for(KvType::kInt4c) + kv.plane_bytes_for(KvType::kInt2));
  KvReadTable t;
  t.reset(kv, c.table.data(), 75, 80);
  t.bind_layer(0);  // sealed: cold reads come from the arena
  const int32_t h = 1, slot = 3;
  const kernels::KvCodec k4c = KvType::kInt4c, v2 = KvType::kInt2;
  KvTile cold = t.tile(h, 77, 1 * kBt + slot, 4);
  EXPECT_EQ(cold.k_codec, k4c);
  EXPECT_EQ(cold.v_codec, v2);
  EXPECT_EQ(cold.k, kv.plane(c.table[1], 0, 0) + kv.head_elem_offset(k4c, h) + slot * row_bytes(k4c));
  EXPECT_EQ(cold.v, kv.plane(c.table[1], 0, 0) + kv.plane_bytes(0) + kv.head_elem_offset(v2, h) + slot * row_bytes(v2));
  EXPECT_EQ(cold.ks, kv.plane(c.table[1], 0, 0) + kv.head_scale_offset(k4c, h));
  EXPECT_EQ(cold.vs, kv.plane(c.table[1], 0, 1) + kv.head_scale_offset(v2, h));
  EXPECT_EQ(cold.bytes, 4 * row_bytes(k4c));
  EXPECT_EQ(cold.v_bytes, 4 * row_bytes(v2));
  // The hot form: K encoded in int8 (with scales), V in f16 (the staging type, no scales), each
  // made by the commit encoder.
  std::vector<float> tmp(kBt * kHd);
  KvTile hot = t.tile(h, 77, 3 * kBt + slot, 4);
  EXPECT_EQ(hot.k_codec, KvType::kInt8);
  EXPECT_EQ(hot.v_codec, KvType::kF16);
  EXPECT_NE(hot.ks, nullptr);
  EXPECT_EQ(hot.vs, nullptr);
  for (int32_t st = 0; st < 2; ++st) {
    const kernels::KvCodec codec = st == 0 ? KvType::kInt8 : KvType::kF16;
    std::vector<uint8_t> want(kv.plane_bytes_for(codec));
    kv.encode_head(codec, c.table[3].idx, 0, st, h, tmp.data(), want.data());
    EXPECT_EQ(0, std::memcmp(st == 0 ? hot.k : hot.v, want.data() + kv.head_elem_offset(codec, h) + slot * row_bytes(codec),
                             4 * row_bytes(codec)))
        << st;
  }
  // Layer 1 is not sealed: its cold reads are encoded per stream, equal to what sealing writes.
  KvReadTable t1;
  t1.reset(kv, c.table.data(), 75, 80);
  t1.bind_layer(1);
  KvTile enc = t1.tile(h, 77, 1 * kBt, 16);
  std::vector<uint8_t> want_k(kv.plane_bytes_for(k4c)), want_v(kv.plane_bytes_for(v2));
  kv.encode_head(k4c, c.table[1].idx, 1, 0, h, tmp.data(), want_k.data());
  kv.encode_head(v2, c.table[1].idx, 1, 1, h, tmp.data(), want_v.data());
  EXPECT_EQ(0, std::memcmp(enc.k, want_k.data() + kv.head_elem_offset(k4c, h), 16 * row_bytes(k4c)));
  EXPECT_EQ(0, std::memcmp(enc.v, want_v.data() + kv.head_elem_offset(v2, h), 16 * row_bytes(v2)));
  EXPECT_EQ(0, std::memcmp(enc.vs, want_v.data() + kv.head_scale_offset(v2, h),
                           kernels::kv_head_scale_bytes(v2, kHd)));
}

TEST(KvReadTableTest, FarBlocksAreReadThroughTheMappingAndCheckedWhenBound) {
  Cache c = make_cache(KvPrecision{KvType::kInt8, 0, KvType::kInt8}, 48, kLayers);
  KvCache& kv = *c.kv;
  kv.commit(c.table.data(), 48);  // every block finalized: encoded, staging released
  const std::string dir = ::testing::TempDir() + "/kv_read_table_test";
  std::filesystem::create_directories(dir);
  FarTierOptions o;
  o.dir = dir;
  o.budget_bytes = 4 * kv.block_bytes();
  o.num_layers = kLayers;
  o.layer_bytes = kv.layer_bytes();
  o.segments = kv.far_segments();
  auto far = FarTier::open(o);
  ASSERT_TRUE(far.ok()) << far.status().message();
  kv.attach_far(far->get());
  const std::vector<uint8_t> before(kv.block_data(c.table[0].idx), kv.block_data(c.table[0].idx) + kv.block_bytes());
  auto slot = kv.spill(c.table[0].idx);
  ASSERT_TRUE(slot.has_value());
  kv.pool().unref(c.table[0].idx);
  c.table[0] = BlockRef::far(*slot);

  KvReader reader;
  reader.begin_step(kv, 1);
  reader.table(0).reset(kv, c.table.data(), 47, 48);
  reader.bind_layer(1, nullptr);
  const kernels::KvCodec i8 = kernels::KvCodec::kInt8;
  KvTile t = reader.table(0).tile(1, 47, 2, 4);
  EXPECT_EQ(t.k, (*far)->layer_data(*slot, 1) + kv.head_elem_offset(i8, 1) + 2 * row_bytes(i8));
  EXPECT_EQ(0, std::memcmp(t.k, before.data() + kv.layer_bytes() + kv.head_elem_offset(i8, 1) + 2 * row_bytes(i8),
                           4 * row_bytes(i8)));
  reader.end_layer(1);
  EXPECT_TRUE((*far)->take_corrupt().empty());

  // A flipped byte on disk is found when the next layer pass binds the table, before any read.
  ASSERT_TRUE((*far)->corrupt_for_test(*slot, 0, kv.head_elem_offset(i8, 0) + 3).ok());
  reader.bind_layer(0, nullptr);
  EXPECT_EQ((*far)->take_corrupt(), std::vector<int32_t>{*slot});
  reader.end_layer(0);
  kv.release_block(c.table[0]);
  EXPECT_EQ((*far)->num_used(), 0);
}

}  // namespace
}  // namespace hz
