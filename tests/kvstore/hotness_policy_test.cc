// Hotness policies: LRU order, and LFU with exponential decay (frequency wins, but only while it is
// recent enough).
#include <gtest/gtest.h>

#include "kvstore/hotness_policy.h"

namespace hz::kvstore {
namespace {

TEST(HotnessPolicy, LruEvictsLeastRecentlyTouched) {
  auto p = make_lru_policy();
  EXPECT_FALSE(p->coldest().has_value());
  for (uint64_t k : {1, 2, 3}) p->touch(k);
  EXPECT_EQ(*p->coldest(), 1u);
  p->touch(1);
  EXPECT_EQ(*p->coldest(), 2u);
  p->erase(2);
  EXPECT_EQ(*p->coldest(), 3u);
  EXPECT_EQ(p->size(), 2u);
  p->erase(99);  // unknown: ignored
  EXPECT_EQ(p->size(), 2u);
}

TEST(HotnessPolicy, LfuDecayKeepsFrequentBlocksOverRecentOnes) {
  auto p = make_lfu_decay_policy(/*half_life=*/100);
  for (int i = 0; i < 10; ++i) p->touch(1);  // hot
  p->touch(2);                               // touched once, more recently
  EXPECT_EQ(*p->coldest(), 2u);  // LRU would evict 1 here
  auto lru = make_lru_policy();
  for (int i = 0; i < 10; ++i) lru->touch(1);
  lru->touch(2);
  EXPECT_EQ(*lru->coldest(), 1u);
}

TEST(HotnessPolicy, LfuDecayForgetsOldFrequency) {
  auto p = make_lfu_decay_policy(/*half_life=*/4);
  for (int i = 0; i < 8; ++i) p->touch(1);  // count ~8, then it ages
  for (int i = 0; i < 40; ++i) p->touch(100 + i % 2);  // 40 ticks = 10 half-lives later
  p->touch(2);
  // 1's count decayed to ~8 / 1024 < 1: the block touched once just now is hotter.
  EXPECT_EQ(*p->coldest(), 1u);
  p->erase(1);
  EXPECT_EQ(p->size(), 3u);
}

TEST(HotnessPolicy, ByName) {
  EXPECT_STREQ((*make_policy("lru", "--kv-disk-policy"))->name(), "lru");
  EXPECT_STREQ((*make_policy("lfu-decay", "--kv-disk-policy"))->name(), "lfu-decay");
  auto bad = make_policy("mru", "--kv-disk-policy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--kv-disk-policy"), std::string::npos);
}

}  // namespace
}  // namespace hz::kvstore
