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
