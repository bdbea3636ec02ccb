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

// A sequence's own chunk limit (a scored prompt) applies below the scheduler's; others keep theirs.
TEST(SchedulerTest, ASequencesMaxChunkCapsItsPromptChunks) {
  BlockPool pool(64);
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 64, .prefill_chunk = 20, .block_tokens = 16}, kv);
  auto capped = make_seq(1, 30);
  capped->max_chunk = 8;
  s.add(std::move(capped));
  auto big = make_seq(2, 30);
  big->max_chunk = 100;  // above prefill_chunk: prefill_chunk holds
  s.add(std::move(big));
  auto a = step(s);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].num_tokens, 8);
  EXPECT_EQ(a[1].num_tokens, 20);
  std::vector<int32_t> chunks = {8};
  for (int i = 0; i < 10 && chunks.size() < 4; ++i) {
    for (const auto& x : step(s)) {
      if (x.seq->id == 1u) chunks.push_back(x.num_tokens);
    }
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{8, 8, 8, 6}));
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

TEST(SchedulerTest, PromptTokensBesideADecodeAreCappedAndAloneTakeTheBudget) {
  BlockPool pool(64);
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 4,
               .max_num_batched_tokens = 64,
               .prefill_chunk = 64,
               .prefill_with_decode = 8,
               .block_tokens = 16},
              kv);
  s.add(make_seq(1, 40));
  auto a = step(s);  // nothing decodes: the whole prompt in one step
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].num_tokens, 40);
  s.add(make_seq(2, 30));
  s.add(make_seq(3, 30));
  auto b = step(s);  // seq 1 decodes: its token, then 8 prompt tokens across the others
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].seq->id, 1u);
  EXPECT_EQ(b[0].num_tokens, 1);
  EXPECT_EQ(b[1].seq->id, 2u);
  EXPECT_EQ(b[1].num_tokens, 8);
  for (int i = 0; i < 10; ++i) {
    auto c = step(s);
    int32_t prompt = 0;
    for (const auto& x : c) {
      if (x.seq->num_computed <= x.seq->num_prompt_tokens) prompt += x.num_tokens;  // a prompt chunk
    }
    EXPECT_LE(prompt, 8) << "step " << i;
    EXPECT_EQ(c[0].seq->id, 1u);  // the stream never waits for a prompt
  }
  // Once every prompt is in (2 x 30 tokens at 8 per step), all three decode together.
  for (int i = 0; i < 4; ++i) step(s);
  auto d = step(s);
  ASSERT_EQ(d.size(), 3u);
  for (const auto& x : d) EXPECT_EQ(x.num_tokens, 1);
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

// Speculative steps: a decoding sequence's draft runs with its next token; after verification the
// engine keeps `accepted` draft tokens (appended to tokens) and the rest roll back.
void verify(Scheduler& s, std::vector<ScheduledSlice>& slices, int32_t accepted) {
  for (auto& x : slices) {
    if (x.num_draft == 0) {
      if (x.samples()) x.seq->tokens.push_back(7);
      continue;
    }
    for (int32_t j = 0; j < accepted; ++j) x.seq->tokens.push_back(x.seq->draft[j]);
    x.seq->tokens.push_back(8);  // the token sampled after them
    x.num_tokens -= x.num_draft - accepted;
  }
  s.commit(slices);
}

TEST(SchedulerTest, DraftRunsWithTheNextTokenAndRejectedBlocksRollBack) {
  BlockPool pool(16);
  FakeKvStorage storage;
  KvManager kv(pool, 16, &storage);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 64, .prefill_chunk = 64, .block_tokens = 16}, kv);
  s.add(make_seq(1, 14));
  step(s);  // prefill: 14 computed, 15 tokens
  Sequence& q = *s.running()[0];
  ASSERT_EQ(q.num_pending(), 1);
  q.draft = {20, 21, 22, 23, 24};  // positions 15..19: into a second block
  auto slices = s.schedule();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].num_tokens, 6);
  EXPECT_EQ(slices[0].num_draft, 5);
  EXPECT_TRUE(slices[0].samples());
  EXPECT_EQ(q.block_table, pool_refs({0, 1}));
  // One draft token accepted: 16 positions computed; the second block held only rejected ones.
  verify(s, slices, 1);
  EXPECT_EQ(q.num_computed, 16);
  EXPECT_EQ(q.tokens.size(), 17u);
  EXPECT_TRUE(q.draft.empty());
  EXPECT_EQ(q.block_table, pool_refs({0}));
  EXPECT_EQ(pool.num_free(), 15);
  EXPECT_TRUE(storage.reopened.empty());  // block 0 is full and all its rows stand
  // Next step: a draft that is rejected outright inside one block; that block is reopened.
  q.draft = {30, 31};
  slices = s.schedule();
  ASSERT_EQ(slices[0].num_tokens, 3);
  EXPECT_EQ(q.block_table, pool_refs({0, 1}));
  verify(s, slices, 0);
  EXPECT_EQ(q.num_computed, 17);
  EXPECT_EQ(q.block_table, pool_refs({0, 1}));
  EXPECT_EQ(storage.reopened, std::vector<int32_t>{1});
  // All accepted.
  q.draft = {40, 41, 42};
  slices = s.schedule();
  verify(s, slices, 3);
  EXPECT_EQ(q.num_computed, 21);
  EXPECT_EQ(q.tokens.size(), 22u);
  EXPECT_EQ(q.num_pending(), 1);
}

TEST(SchedulerTest, DraftsUseOnlySpareBudgetAndFreeBlocks) {
  BlockPool pool(3);
  FakeKvStorage storage;
  KvManager kv(pool, 16, &storage);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 4, .prefill_chunk = 64, .block_tokens = 16}, kv);
  s.add(make_seq(1, 8));
  s.add(make_seq(2, 8));
  step(s);
  ASSERT_EQ(s.num_running(), 2);
  while (s.running()[0]->num_pending() != 1 || s.running()[1]->num_pending() != 1) step(s);
  Sequence& a = *s.running()[0];
  Sequence& b = *s.running()[1];
  a.draft = {1, 2, 3, 4, 5, 6};
  b.draft = {1, 2, 3};
  auto slices = s.schedule();
  ASSERT_EQ(slices.size(), 2u);
  // Budget 4: one token each, the 2 left go to the first draft.
  EXPECT_EQ(slices[0].num_tokens, 3);
  EXPECT_EQ(slices[0].num_draft, 2);
  EXPECT_EQ(slices[1].num_tokens, 1);
  EXPECT_EQ(slices[1].num_draft, 0);
  EXPECT_TRUE(b.draft.empty());
  verify(s, slices, 0);
}

TEST(SchedulerTest, DraftShrinksToTheFreeBlocksAndPreemptsNobody) {
  BlockPool pool(3);
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 64, .prefill_chunk = 64, .block_tokens = 16}, kv);
  s.add(make_seq(1, 8));
  s.add(make_seq(2, 8));
  step(s);  // one block each, one free
  Sequence& a = *s.running()[0];
  a.draft.assign(40, 3);  // positions 9..48: four blocks, only two would be there
  auto slices = s.schedule();
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(s.num_preemptions(), 0u);
  EXPECT_EQ(slices[0].num_draft, 23);  // up to position 31: the free block
  EXPECT_EQ(a.block_table.size(), 2u);
  EXPECT_EQ(slices[1].num_tokens, 1);
  verify(s, slices, 0);
  EXPECT_EQ(a.block_table.size(), 1u);
  EXPECT_EQ(pool.num_free(), 1);
}

TEST(SchedulerTest, PreemptedSequenceLosesItsDraft) {
  BlockPool pool(2);
  KvManager kv(pool, 16);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 64, .prefill_chunk = 64, .block_tokens = 16}, kv);
  s.add(make_seq(1, 15));
  s.add(make_seq(2, 15));
  step(s);  // both prefilled, one block each
  Sequence* second = s.running()[1].get();
  second->draft = {1, 2};
  // The first grows into a second block: the pool is dry, the newest is preempted.
  s.running()[0]->tokens.push_back(7);
  s.running()[0]->draft.clear();
  auto slices = s.schedule();
  ASSERT_EQ(s.num_waiting(), 1);
  EXPECT_TRUE(s.waiting().front()->draft.empty());
  EXPECT_EQ(s.waiting().front()->block_table.size(), 0u);
}

}  // namespace
}  // namespace hz
