#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <random>

namespace hz {
namespace {

TEST(BlockPoolTest, AllocatesLowestIdsFirstForContiguousRuns) {
  BlockPool pool(8);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.allocate_n(3, &got));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  pool.unref(1);
  EXPECT_EQ(*pool.allocate(), 1);
  EXPECT_EQ(*pool.allocate(), 3);
  pool.check_invariants();
}

TEST(BlockPoolTest, AllocateNIsAllOrNothing) {
  BlockPool pool(4);
  std::vector<int32_t> got;
  EXPECT_FALSE(pool.allocate_n(5, &got));
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_TRUE(pool.allocate_n(4, &got));
  EXPECT_FALSE(pool.allocate().has_value());
}

TEST(BlockPoolTest, SharedBlockReturnsOnlyAfterLastReference) {
  BlockPool pool(2);
  int32_t b = *pool.allocate();
  pool.ref(b);
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.unref(b);
  EXPECT_EQ(pool.num_free(), 1);
  pool.unref(b);
  EXPECT_EQ(pool.num_free(), 2);
  pool.check_invariants();
}

TEST(BlockPoolTest, RandomOperationsLeakNothing) {
  BlockPool pool(64);
  std::mt19937 rng(7);
  std::vector<int32_t> held;
  for (int i = 0; i < 10000; ++i) {
    int op = rng() % 3;
    if (op == 0) {
      if (auto b = pool.allocate()) held.push_back(*b);
    } else if (op == 1 && !held.empty()) {
      int32_t b = held[rng() % held.size()];
      pool.ref(b);
      held.push_back(b);
    } else if (!held.empty()) {
      size_t k = rng() % held.size();
      pool.unref(held[k]);
      held.erase(held.begin() + k);
    }
    if (i % 500 == 0) pool.check_invariants();
  }
  for (int32_t b : held) pool.unref(b);
  pool.check_invariants();
  EXPECT_EQ(pool.num_free(), 64);
}

}  // namespace
}  // namespace hz

namespace hz {
namespace {

// With an LFU-with-decay policy the pool evicts the cached block used least (decayed), not the one
// released longest ago; without a policy or with LRU, the one released longest ago.
TEST(BlockPoolPolicy, LfuDecayEvictsTheLeastUsedCachedBlock) {
  for (int mode = 0; mode < 3; ++mode) {  // no policy, LRU policy, LFU-with-decay
    BlockPool pool(3);
    std::unique_ptr<kvstore::HotnessPolicy> policy;
    if (mode == 1) policy = kvstore::make_lru_policy();
    if (mode == 2) policy = kvstore::make_lfu_decay_policy(1000);
    pool.set_eviction_policy(policy.get());
    std::vector<int32_t> b;
    ASSERT_TRUE(pool.allocate_n(3, &b));
    for (int32_t x : b) pool.set_cacheable(x);
    pool.unref(b[0]);
    for (int i = 0; i < 5; ++i) {  // block 0 is hit often, early
      pool.acquire(b[0]);
      pool.unref(b[0]);
    }
    pool.unref(b[1]);  // then 1 and 2 are released, once each
    pool.unref(b[2]);
    pool.check_invariants();
    auto v = pool.allocate();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, mode == 2 ? b[1] : b[0]) << mode;
    EXPECT_FALSE(pool.cacheable(*v));
    pool.unref(*v);
    pool.check_invariants();
    if (policy) EXPECT_EQ(policy->size(), 2u);  // the evicted block left the policy
  }
}

}  // namespace
}  // namespace hz
