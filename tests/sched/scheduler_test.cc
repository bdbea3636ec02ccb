#include "sched/scheduler.h"

#include <gtest/gtest.h>

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
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 32, .prefill_chunk = 20, .block_tokens = 16}, pool);
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
  EXPECT_EQ(s.running()[0]->block_table, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(SchedulerTest, DecodesRunBesidePrefillChunks) {
  BlockPool pool(64);
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 16, .prefill_chunk = 16, .block_tokens = 16}, pool);
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
  Scheduler s({.max_num_seqs = 2, .max_num_batched_tokens = 100, .prefill_chunk = 100, .block_tokens = 16}, pool);
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
  Scheduler s({.max_num_seqs = 4, .max_num_batched_tokens = 100, .prefill_chunk = 100, .block_tokens = 16}, pool);
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

}  // namespace
}  // namespace hz
