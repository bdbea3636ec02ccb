// Prefix caching bookkeeping: exact block ids on tiny pools (attach, LRU eviction, revival),
// copy-on-write of a shared block, and 10,000 random alloc/share/free/cancel operations through
// the scheduler with the pool invariant checked after every one.
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "sched/scheduler.h"
#include "support/block_refs.h"
#include "support/fake_kv_storage.h"

namespace hz {
namespace {

std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(PrefixCacheTest, HashChainDependsOnParentTokensAndModel) {
  BlockPool pool(4);
  PrefixCache a(pool, 16, "model-a");
  auto t = iota_tokens(32);
  EXPECT_NE(a.chain_hash(0, t.data()), a.chain_hash(0, t.data() + 16));
  EXPECT_NE(a.chain_hash(0, t.data()), a.chain_hash(a.chain_hash(0, t.data()), t.data()));
  BlockPool pool2(4);
  PrefixCache b(pool2, 16, "model-b");
  EXPECT_NE(a.chain_hash(0, t.data()), b.chain_hash(0, t.data()));
  EXPECT_EQ(a.chain_hash(7, t.data()), a.chain_hash(7, t.data()));
}

TEST(PrefixCacheTest, TinyPoolExactIdsAttachEvictRevive) {
  BlockPool pool(4);
  PrefixCache cache(pool, 16, "m");
  auto t = iota_tokens(48);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate_n(3, &a));
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1, 2}));
  uint64_t h0 = cache.chain_hash(0, t.data()), h1 = cache.chain_hash(h0, t.data() + 16);
  cache.insert(h0, 0, t.data());
  cache.insert(h1, 1, t.data() + 16);
  for (int32_t b : a) pool.unref(b);
  EXPECT_EQ(pool.num_free(), 2);    // 2, 3
  EXPECT_EQ(pool.num_cached(), 2);  // 0, 1
  pool.check_invariants();

  auto m = cache.match(t.data(), 2);
  EXPECT_EQ(m.blocks, (std::vector<int32_t>{0, 1}));
  // A different second block matches only the first.
  auto t2 = t;
  t2[20] = 999;
  EXPECT_EQ(cache.match(t2.data(), 2).blocks, (std::vector<int32_t>{0}));

  // Revive block 1 (attach), then allocate: free ids first (2, 3), then the LRU cached block 0.
  pool.acquire(1);
  EXPECT_EQ(pool.num_cached(), 1);
  EXPECT_EQ(*pool.allocate(), 2);
  EXPECT_EQ(*pool.allocate(), 3);
  EXPECT_EQ(*pool.allocate(), 0);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_FALSE(cache.contains(0));
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(pool.allocate().has_value());
  // Block 0's key is gone, so the chain no longer matches from the start.
  EXPECT_TRUE(cache.match(t.data(), 2).blocks.empty());
  pool.check_invariants();
}

TEST(PrefixCacheTest, LruEvictsTheLeastRecentlyReleased) {
  BlockPool pool(3);
  PrefixCache cache(pool, 16, "m");
  std::vector<std::vector<int32_t>> toks = {iota_tokens(16, 0), iota_tokens(16, 100), iota_tokens(16, 200)};
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.allocate_n(3, &ids));
  for (int i = 0; i < 3; ++i) cache.insert(cache.chain_hash(0, toks[i].data()), ids[i], toks[i].data());
  pool.unref(1);
  pool.unref(0);
  pool.unref(2);  // release order 1, 0, 2
  EXPECT_EQ(*pool.allocate(), 1);
  EXPECT_EQ(*pool.allocate(), 0);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.match(toks[2].data(), 1).blocks, (std::vector<int32_t>{2}));
}

SchedulerConfig sched_config() {
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.prefill_chunk = 64;
  c.block_tokens = 16;
  return c;
}

std::unique_ptr<Sequence> make_seq(uint64_t id, std::vector<int32_t> tokens) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->num_prompt_tokens = static_cast<int32_t>(tokens.size());
  s->tokens = std::move(tokens);
  return s;
}

TEST(PrefixCacheTest, SchedulerAttachesCachedPrefixAndPrefillsOnlyTheRest) {
  BlockPool pool(8);
  PrefixCache cache(pool, 16, "m");
  KvManager kv(pool, 16);
  kv.set_prefix_cache(&cache);
  Scheduler sched(sched_config(), kv);
  sched.add(make_seq(1, iota_tokens(40)));
  auto slices = sched.schedule();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].num_tokens, 40);
  EXPECT_EQ(slices[0].seq->block_table, pool_refs({0, 1, 2}));
  sched.commit(slices);
  EXPECT_EQ(cache.size(), 2u);  // blocks 0 and 1 are full; block 2 holds 8 of 16
  sched.remove(1);
  EXPECT_EQ(pool.num_cached(), 2);

  auto t = iota_tokens(40);
  t.push_back(77);
  sched.add(make_seq(2, t));
  slices = sched.schedule();
  ASSERT_EQ(slices.size(), 1u);
  Sequence* s = slices[0].seq;
  EXPECT_EQ(s->num_cached_tokens, 32);
  EXPECT_EQ(s->num_computed, 32);
  EXPECT_EQ(slices[0].num_tokens, 9);  // only the suffix
  EXPECT_EQ(s->block_table, pool_refs({0, 1, 2}));
  EXPECT_EQ(cache.queries(), 4u);  // 2 blocks looked up for each prompt
  EXPECT_EQ(cache.hits(), 2u);
  EXPECT_EQ(pool.num_cached(), 0);
  pool.check_invariants();
}

TEST(PrefixCacheTest, PromptOfWholeBlocksStillRunsItsLastBlock) {
  BlockPool pool(8);
  PrefixCache cache(pool, 16, "m");
  KvManager kv(pool, 16);
  kv.set_prefix_cache(&cache);
  Scheduler sched(sched_config(), kv);
  sched.add(make_seq(1, iota_tokens(32)));
  sched.commit(sched.schedule());
  sched.remove(1);
  sched.add(make_seq(2, iota_tokens(32)));
  auto slices = sched.schedule();
  // Block 1 holds the last prompt token, which must run to be sampled: only block 0 attaches.
  EXPECT_EQ(slices[0].seq->num_computed, 16);
  EXPECT_EQ(slices[0].num_tokens, 16);
  EXPECT_EQ(slices[0].seq->block_table[0], BlockRef::pool(0));
  EXPECT_NE(slices[0].seq->block_table[1], BlockRef::pool(1));  // block 1 stays cached; a fresh block is written
}

TEST(PrefixCacheTest, CopyOnWriteWhenASharedBlockMustBeWritten) {
  BlockPool pool(4);
  FakeKvStorage storage;
  KvManager kv(pool, 16, &storage);
  Scheduler sched(sched_config(), kv);
  std::vector<std::pair<int32_t, int32_t>> copies;
  storage.on_copy = [&](int32_t src, int32_t dst) { copies.emplace_back(src, dst); };
  int32_t shared = *pool.allocate();
  pool.ref(shared);  // another sequence holds it too
  auto s = make_seq(1, iota_tokens(10));
  s->block_table = {BlockRef::pool(shared)};
  s->num_computed = 5;  // the next write lands in slot 5 of the shared block
  sched.add(std::move(s));
  auto slices = sched.schedule();
  ASSERT_EQ(slices.size(), 1u);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], std::make_pair(shared, 1));
  EXPECT_EQ(slices[0].seq->block_table, pool_refs({1}));
  EXPECT_EQ(pool.ref_count(shared), 1);
  pool.check_invariants();
}

// Sink blocks (read hot by every query) attach as private copies of their hot form, like the newest
// hot_blocks; the blocks between are shared. They are never spilled to the far tier.
TEST(PrefixCacheTest, SinkBlocksAttachAsPrivateCopiesAndNeverSpill) {
  BlockPool pool(12);
  PrefixCache cache(pool, 16, "m");
  FakeKvStorage storage;
  storage.sinks = 1;
  storage.hot = [](int32_t) { return true; };
  std::vector<std::pair<int32_t, int32_t>> copies;
  storage.on_copy = [&](int32_t src, int32_t dst) { copies.emplace_back(src, dst); };
  KvManager kv(pool, 16, &storage);
  kv.set_prefix_cache(&cache, /*hot_blocks=*/1);
  Scheduler sched(sched_config(), kv);
  sched.add(make_seq(1, iota_tokens(100)));
  sched.commit(sched.schedule());  // 64 tokens a step
  sched.commit(sched.schedule());
  sched.remove(1);
  ASSERT_GE(pool.num_cached(), 5);
  auto t = iota_tokens(80);
  t.push_back(7);
  sched.add(make_seq(2, t));
  auto slices = sched.schedule();
  ASSERT_EQ(slices.size(), 1u);
  Sequence* s = slices[0].seq;
  EXPECT_EQ(s->num_cached_tokens, 80);  // 5 blocks attached: 2 copies, 3 shared
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].first, 0);  // the sink block
  EXPECT_EQ(copies[1].first, 4);  // the newest, read hot
  EXPECT_EQ(s->block_table[0], BlockRef::pool(copies[0].second));
  EXPECT_EQ(s->block_table[1], BlockRef::pool(1));  // shared
  EXPECT_EQ(s->block_table[3], BlockRef::pool(3));
  EXPECT_EQ(s->block_table[4], BlockRef::pool(copies[1].second));
  sched.commit(slices);
  // Spilling takes the oldest finalized, exclusively held blocks, never the sink block.
  std::vector<int32_t> spilled;
  storage.on_spill = [&](int32_t b) -> std::optional<int32_t> {
    spilled.push_back(b);
    return static_cast<int32_t>(spilled.size());
  };
  bool full = false;
  KvSeq& seq = *s;
  kv.spill(seq, 8, &full);
  EXPECT_FALSE(full);
  for (int32_t b : spilled) EXPECT_NE(b, copies[0].second);
  EXPECT_TRUE(seq.block_table[0].is_pool());
  pool.check_invariants();
}

TEST(PrefixCacheTest, TenThousandRandomOperationsLeakNothing) {
  BlockPool pool(24);
  PrefixCache cache(pool, 16, "m");
  SchedulerConfig cfg = sched_config();
  cfg.prefill_chunk = 24;
  KvManager kv(pool, 16);
  kv.set_prefix_cache(&cache);
  Scheduler sched(cfg, kv);
  std::mt19937 rng(1234);
  // Prompts share a few prefixes so that attach, share, revive and evict all happen.
  std::vector<std::vector<int32_t>> prefixes = {iota_tokens(48, 0), iota_tokens(40, 1000), iota_tokens(70, 2000)};
  uint64_t next_id = 1;
  std::vector<uint64_t> live;
  for (int op = 0; op < 10000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3 && live.size() < 8) {  // new request
      auto t = prefixes[rng() % prefixes.size()];
      t.resize(8 + rng() % t.size());
      for (int i = 0, n = static_cast<int>(rng() % 20); i < n; ++i) t.push_back(5000 + static_cast<int32_t>(rng() % 7));
      sched.add(make_seq(next_id, t));
      live.push_back(next_id++);
    } else if (kind < 8) {  // a step: prefill chunks or decode one token each
      auto slices = sched.schedule();
      sched.commit(slices);
      for (auto& s : slices) {
        if (s.samples()) s.seq->tokens.push_back(static_cast<int32_t>(rng() % 50));
      }
    } else if (!live.empty()) {  // finish or cancel (running or still waiting)
      size_t i = rng() % live.size();
      sched.remove(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    pool.check_invariants();
    for (int32_t b = 0; b < pool.num_blocks(); ++b) ASSERT_EQ(pool.cacheable(b), cache.contains(b)) << "block " << b;
    // Referenced blocks are exactly those in running tables.
    std::vector<int32_t> refs(pool.num_blocks(), 0);
    for (const auto& s : sched.running()) for (BlockRef b : s->block_table) ++refs[b.idx];
    for (const auto& s : sched.waiting()) for (BlockRef b : s->block_table) ++refs[b.idx];
    for (int32_t b = 0; b < pool.num_blocks(); ++b) ASSERT_EQ(refs[b], pool.ref_count(b)) << "op " << op;
  }
  EXPECT_GT(cache.hits(), 100u);
  EXPECT_GT(cache.evictions(), 10u);
  for (uint64_t id : live) sched.remove(id);
  pool.check_invariants();
  EXPECT_EQ(pool.num_used(), 0);
  EXPECT_EQ(pool.num_allocatable(), pool.num_blocks());
}

}  // namespace
}  // namespace hz
