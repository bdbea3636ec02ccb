#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/block_refs.h"
#include "support/fake_kv_storage.h"

namespace hz {
namespace {

std::unique_ptr<Sequence> make_seq(uint64_t id, int prompt) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens.assign(prompt, 5);
  s->num_prompt_tokens = prompt;
  return s;
}

// Runs one step the way the engine does: commit, and append a token to sequences that sample.
std::vector<ScheduledSlice> step(Scheduler& s) {
  auto slices = s.schedule();
  std::vector<bool> samples;
  for (auto& x : slices) samples.push_back(x.samples());
  s.commit(slices);
  for (size_t i = 0; i < slices.size(); ++i) {
    if (samples[i]) slices[i].seq->tokens.push_back(7);
  }
  return slices;
}

TEST(SchedulerTest, ChunksLongPromptsWithinTheTokenBudget) {
  BlockPool pool(64);
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 32, .prefill_chunk = 20, .block_tokens = 16}, kv);
  s.add(make_seq(1, 50));
  auto a = step(s);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].num_tokens, 20);
  auto b = step(s);
  EXPECT_EQ(b[0].num_tokens, 20);
  auto c = step(s);
  EXPECT_EQ(c[0].num_tokens, 10);
  auto d = step(s);  // decoding now
  EXPECT_EQ(d[0].num_tokens, 1);
  EXPECT_EQ(s.running()[0]->block_table, pool_refs({0, 1, 2, 3}));
}

TEST(SchedulerTest, DecodesRunBesidePrefillChunks) {
  BlockPool pool(64);
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 16, .prefill_chunk = 16, .block_tokens = 16}, kv);
  s.add(make_seq(1, 4));
  step(s);  // prefill seq 1
  s.add(make_seq(2, 40));
  auto slices = step(s);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].seq->id, 1u);  // decode first
  EXPECT_EQ(slices[0].num_tokens, 1);
  EXPECT_EQ(slices[1].seq->id, 2u);
  EXPECT_EQ(slices[1].num_tokens, 15);  // what the budget leaves
}

TEST(SchedulerTest, RespectsMaxNumSeqs) {
  BlockPool pool(64);
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 2, .max_num_batched_tokens = 100, .prefill_chunk = 100, .block_tokens = 16}, kv);
  for (uint64_t i = 1; i <= 3; ++i) s.add(make_seq(i, 4));
  auto slices = step(s);
  EXPECT_EQ(slices.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1);
  s.remove(1);
  slices = step(s);
  EXPECT_EQ(slices.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 0);
}

TEST(SchedulerTest, PreemptsNewestWhenPoolRunsDryAndFreesEverything) {
  BlockPool pool(4);  // 64 tokens
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 100, .prefill_chunk = 100, .block_tokens = 16}, kv);
  s.add(make_seq(1, 30));
  s.add(make_seq(2, 30));
  step(s);  // both prefilled: 2 blocks each, pool full
  EXPECT_EQ(pool.num_free(), 0);
  // Seq 1 reaches position 32 on the third decode and needs a third block: seq 2 is preempted.
  step(s);
  step(s);
  EXPECT_EQ(s.num_preemptions(), 0u);
  step(s);
  EXPECT_EQ(s.num_preemptions(), 1u);
  EXPECT_EQ(s.num_running(), 1);
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(s.waiting().front()->num_computed, 0);
  s.remove(1);
  s.remove(2);
  EXPECT_EQ(pool.num_free(), 4);
  pool.check_invariants();
}

// With a far tier the same situation spills seq 1's finalized blocks (its own first, oldest
// first) instead of preempting seq 2; far ids follow the pool's; removal releases them.
TEST(SchedulerTest, SpillsFinalizedBlocksToTheFarTierInsteadOfPreempting) {
  BlockPool pool(4);
  FakeKvStorage storage;
  KvManager kv(pool, 16, &storage);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 100, .prefill_chunk = 100, .block_tokens = 16}, kv);
  std::vector<int32_t> spilled, released;
  int32_t next_far = 0;  // far slots; block tables hold them after the pool's ids (4 + slot)
  int32_t room = 2;      // far slots
  storage.on_spill = [&](int32_t b) -> std::optional<int32_t> {
    if (room == 0) return std::nullopt;
    --room;
    spilled.push_back(b);
    return next_far++;
  };
  storage.on_release_far = [&](int32_t f) {
    released.push_back(f);
    ++room;
  };
  s.add(make_seq(1, 30));
  s.add(make_seq(2, 20));
  step(s);  // both prefilled: 2 blocks each, pool full
  step(s);
  step(s);  // seq 1 at 32 positions: blocks 0 and 1 final
  step(s);  // it needs a third block
  EXPECT_EQ(s.num_preemptions(), 0u);
  EXPECT_EQ(s.num_spills(), 1u);
  ASSERT_EQ(spilled.size(), 1u);
  const Sequence& s1 = *s.running()[0];
  EXPECT_EQ(s1.id, 1u);
  EXPECT_EQ(s1.block_table[0], BlockRef::far(0)) << "its oldest block went far";
  EXPECT_EQ(spilled[0], 0);
  EXPECT_EQ(s1.block_table.size(), 3u);
  EXPECT_EQ(s1.block_table[2], BlockRef::pool(0)) << "the freed block";
  // Far tier full: the next shortage preempts as before.
  room = 0;
  for (int i = 0; i < 40 && s.num_preemptions() == 0; ++i) step(s);
  EXPECT_EQ(s.num_preemptions(), 1u);
  s.remove(1);
  s.remove(2);
  EXPECT_EQ(released, std::vector<int32_t>{0});
  EXPECT_EQ(pool.num_free(), 4);
  pool.check_invariants();
}

}  // namespace
}  // namespace hz

namespace hz {
namespace {

// With a hot window, an admitted sequence shares the matched blocks it reads cold only and gets
// private copies of the last `hot_blocks` it reads hot; it attaches only as far as those have
// their hot form.
TEST(SchedulerHotAttachTest, SharesColdBlocksAndCopiesHotOnes) {
  BlockPool pool(32);
  PrefixCache cache(pool, 16, "m");
  FakeKvStorage storage;
  KvManager kv(pool, 16, &storage);
  kv.set_prefix_cache(&cache, 2);
  Scheduler s({.max_num_seqs = 2, .max_num_batched_tokens = 128, .prefill_chunk = 128, .block_tokens = 16}, kv);
  std::vector<std::pair<int32_t, int32_t>> copies;
  storage.on_copy = [&](int32_t src, int32_t dst) { copies.emplace_back(src, dst); };
  std::vector<int32_t> hot;  // blocks whose hot form is "available"
  storage.hot = [&](int32_t b) { return std::find(hot.begin(), hot.end(), b) != hot.end(); };

  auto a = make_seq(1, 70);  // 4 full blocks + 6 tokens
  for (int i = 0; i < 70; ++i) a->tokens[i] = 10 + i;
  s.add(std::move(a));
  step(s);
  const std::vector<BlockRef> a_blocks = s.running()[0]->block_table;
  ASSERT_EQ(a_blocks.size(), 5u);
  s.remove(1);
  EXPECT_EQ(cache.size(), 4u);

  auto admit = [&](uint64_t id) {
    auto b = make_seq(id, 80);
    for (int i = 0; i < 80; ++i) b->tokens[i] = i < 64 ? 10 + i : 500 + i;
    s.add(std::move(b));
    s.schedule();
    return s.running().back().get();
  };
  // Hot forms of blocks 2 and 3: all 4 matched blocks attach, 0-1 shared, 2-3 copied.
  hot = {a_blocks[2].idx, a_blocks[3].idx};
  Sequence* b = admit(2);
  EXPECT_EQ(b->num_computed, 64);
  EXPECT_EQ(b->num_cached_tokens, 64);
  ASSERT_GE(b->block_table.size(), 4u);
  EXPECT_EQ(b->block_table[0], a_blocks[0]);
  EXPECT_EQ(b->block_table[1], a_blocks[1]);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0], std::make_pair(a_blocks[2].idx, b->block_table[2].idx));
  EXPECT_EQ(copies[1], std::make_pair(a_blocks[3].idx, b->block_table[3].idx));
  EXPECT_NE(b->block_table[2], a_blocks[2]);
  EXPECT_EQ(pool.ref_count(b->block_table[2].idx), 1);
  EXPECT_FALSE(pool.cacheable(b->block_table[2].idx));
  EXPECT_EQ(cache.hits(), 4u);
  s.remove(2);
  pool.check_invariants();

  // Only block 1 and 2 hot: the longest prefix ending in hot blocks is 3 blocks (0 shared).
  copies.clear();
  hot = {a_blocks[1].idx, a_blocks[2].idx};
  Sequence* c = admit(3);
  EXPECT_EQ(c->num_computed, 48);
  EXPECT_EQ(c->block_table[0], a_blocks[0]);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].first, a_blocks[1].idx);
  EXPECT_EQ(copies[1].first, a_blocks[2].idx);
  s.remove(3);

  // No hot form at all: nothing attaches, the whole prompt is computed.
  copies.clear();
  hot.clear();
  Sequence* d = admit(4);
  EXPECT_EQ(d->num_computed, 0);
  EXPECT_TRUE(copies.empty());
  s.remove(4);
  pool.check_invariants();
}

}  // namespace
}  // namespace hz
