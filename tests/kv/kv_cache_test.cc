// KvCache: the arena is exactly the planner's figure for every type and shape (issue 6), staging
// copies follow the position rule (finalized blocks are encoded and lose their copy), and
// copy_block / memory accounting behave.
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kv/kv_layout.h"

namespace hz {
namespace {

KvCacheConfig config(int32_t layers, int32_t heads, int32_t hd, int32_t bt, KvPrecision p, int32_t blocks = 8) {
  KvCacheConfig c;
  c.num_layers = layers;
  c.num_kv_heads = heads;
  c.head_dim = hd;
  c.block_tokens = bt;
  c.num_blocks = blocks;
  c.precision = p;
  return c;
}

KvPrecision plain(KvType t) { return KvPrecision{t, 0, t}; }

TEST(KvCacheTest, PoolAllocatesExactlyThePlannersBytes) {
  for (KvType t : all_kv_types()) {
    for (int32_t hd : {4, 8, 32, 40, 64, 128}) {
      for (int32_t bt : {16, 64, 256}) {
        KvCache kv(config(2, 3, hd, bt, plain(t), 3));
        KvGeometry g{2, 2, 3, static_cast<uint64_t>(hd)};
        EXPECT_EQ(kv.block_bytes(), kv_block_bytes(g, t, bt)) << kv_type_name(t) << " hd " << hd << " bt " << bt;
        EXPECT_EQ(kv.total_bytes(), 3 * kv_block_bytes(g, t, bt));
        EXPECT_EQ(kv.memory().arena.bytes_reserved(), kv.total_bytes());
      }
    }
  }
  // With a hot window the arena holds the cold type.
  KvCache mixed(config(2, 2, 64, 16, KvPrecision{KvType::kF16, 64, KvType::kInt4}));
  EXPECT_EQ(mixed.arena_type(0), KvType::kInt4);
  EXPECT_EQ(mixed.arena_type(1), KvType::kInt4);
  EXPECT_EQ(mixed.block_bytes(), kv_block_bytes(KvGeometry{2, 2, 2, 64}, KvType::kInt4, 16));
}

TEST(KvCacheTest, Llama3_8bShapeBytesPerToken) {
  // 32 layers, 8 KV heads, head dim 128, blocks of 16: f16 is 128 KiB per token.
  KvGeometry g{32, 2, 8, 128};
  EXPECT_EQ(kv_bytes_per_token(g, KvType::kF16, 16), 131072.0);
  EXPECT_EQ(kv_bytes_per_token(g, KvType::kInt8, 16), 32.0 * 2 * 8 * (128 + 8));
  EXPECT_EQ(kv_bytes_per_token(g, KvType::kInt4, 16), 32.0 * 2 * 8 * (64 + 8));
  EXPECT_EQ(kv_bytes_per_token(g, KvType::kFp8, 16), 32.0 * 2 * 8 * (128 + 4.0 / 16));
}

TEST(KvCacheTest, UnstagedTypesWriteTheArenaDirectly) {
  KvCache kv(config(1, 1, 8, 16, plain(KvType::kF16)));
  EXPECT_FALSE(kv.staged());
  int32_t b = *kv.pool().allocate();
  EXPECT_EQ(kv.write_row(b, 0, 1, 0, 3), kv.plane(b, 0, 1) + 3 * 8 * 2);
  EXPECT_EQ(kv.num_staging_slots(), 0);
}

TEST(KvCacheTest, BlocksAreEncodedOnceNoQueryReadsThemExactly) {
  KvCache kv(config(1, 1, 32, 16, plain(KvType::kInt8)));
  ASSERT_TRUE(kv.staged());
  std::vector<BlockRef> table;
  ASSERT_TRUE(kv.pool().allocate_n(3, &table));
  for (int32_t p = 0; p < 40; ++p) {
    for (int32_t st = 0; st < 2; ++st) {
      auto* row = reinterpret_cast<uint16_t*>(kv.write_row(table[p / 16], 0, st, 0, p % 16));
      for (int d = 0; d < 32; ++d) row[d] = f32_to_f16(0.01f * (p + d));
    }
  }
  EXPECT_EQ(kv.num_staging_in_use(), 3);
  EXPECT_EQ(kv.finalized_blocks(40), 2);
  EXPECT_EQ(kv.finalized_blocks(32), 2);
  EXPECT_EQ(kv.finalized_blocks(31), 1);
  kv.commit(table.data(), 40);
  EXPECT_FALSE(kv.has_staging(table[0].idx));
  EXPECT_FALSE(kv.has_staging(table[1].idx));
  EXPECT_TRUE(kv.has_staging(table[2].idx));
  EXPECT_EQ(kv.read_form(39, 1), KvRead::kCold);
  EXPECT_EQ(kv.read_form(39, 2), KvRead::kExact);
  // Freeing the partial block drops its staging copy.
  kv.pool().unref(table[2].idx);
  EXPECT_EQ(kv.num_staging_in_use(), 0);
  kv.pool().check_invariants();
}

TEST(KvCacheTest, HotWindowKeepsBlocksStagedUntilOutsideEveryLaterWindow) {
  KvCache kv(config(1, 1, 32, 16, KvPrecision{KvType::kF16, 20, KvType::kInt4}));
  // Query at 40 with window 20 reads [21, 40] hot: block 1 ([16, 32)) overlaps it, block 0 does not.
  EXPECT_EQ(kv.read_form(40, 0), KvRead::kCold);
  EXPECT_EQ(kv.read_form(40, 1), KvRead::kHot);
  EXPECT_EQ(kv.read_form(40, 2), KvRead::kExact);
  // Block 1 ends at 32: hot for queries up to 50, final once 51 positions are computed.
  EXPECT_EQ(kv.finalized_blocks(50), 1);
  EXPECT_EQ(kv.finalized_blocks(51), 2);
}

TEST(KvCacheTest, CopyBlockCopiesArenaAndStaging) {
  KvCache kv(config(2, 2, 8, 16, plain(KvType::kFp8)));
  int32_t a = *kv.pool().allocate(), b = *kv.pool().allocate();
  auto* row = reinterpret_cast<uint16_t*>(kv.write_row(a, 1, 1, 1, 5));
  row[2] = f32_to_f16(3.0f);
  kv.copy_block(a, b);
  ASSERT_TRUE(kv.has_staging(b));
  auto* copy = reinterpret_cast<const uint16_t*>(kv.exact_plane(b, 1, 1));
  EXPECT_EQ(f16_to_f32(copy[(1 * 16 + 5) * 8 + 2]), 3.0f);
  EXPECT_EQ(0, std::memcmp(kv.plane(a, 0, 0), kv.plane(b, 0, 0), kv.block_bytes()));
  EXPECT_NE(kv.exact_plane(a, 1, 1), kv.exact_plane(b, 1, 1));
}

TEST(KvCacheTest, MemoryAccountingByTier) {
  KvCache kv(config(4, 2, 32, 16, KvPrecision{KvType::kF16, 64, KvType::kInt8}, 10));
  std::vector<int32_t> t;
  kv.pool().allocate_n(2, &t);
  kv.write_row(t[0], 0, 0, 0, 0);
  KvMemory m = kv.memory();
  EXPECT_EQ(m.arena.type, KvType::kInt8);
  EXPECT_EQ(m.arena.blocks_total, 10);
  EXPECT_EQ(m.arena.blocks_in_use, 2);
  EXPECT_EQ(m.staging.type, KvType::kF16);
  EXPECT_EQ(m.staging.blocks_in_use, 1);
  EXPECT_EQ(m.staging.bytes_per_block, 4u * 2 * 2 * 16 * 32 * 2);
  EXPECT_DOUBLE_EQ(m.arena_bytes_per_token(), 4.0 * 2 * 2 * (32 + 2));
  EXPECT_NE(m.summary().find("f16 (hot 64) + int8"), std::string::npos) << m.summary();
}

}  // namespace
}  // namespace hz
