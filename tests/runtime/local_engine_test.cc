#include "runtime/local_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "support/golden.h"
#include "support/collect_sink.h"
#include "support/test_support.h"

namespace hz {
namespace {

using test::CollectSink;

std::unique_ptr<LocalEngine> make_engine(int max_seqs = 8, int max_queue = 64, bool prefix_caching = false) {
  EngineOptions o;
  o.model_path = test::model_path("stories260K.gguf");
  o.threads = 2;
  o.max_num_seqs = max_seqs;
  o.max_queue = max_queue;
  o.max_num_batched_tokens = 64;
  o.prefill_chunk = 7;  // odd chunks: prompts are split and interleaved with decodes
  o.enable_prefix_caching = prefix_caching;
  auto e = LocalEngine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

using test::greedy_request;

TEST(LocalEngineTest, ConcurrentGreedyRequestsMatchGoldenAndShareSteps) {
  auto e = make_engine();
  ASSERT_NE(e, nullptr);
  test::GoldenFile g = test::load_golden("stories260K.json");
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (int rep = 0; rep < 2; ++rep) {
    for (const auto& c : g.cases) {
      auto s = std::make_shared<CollectSink>();
      ASSERT_TRUE(e->submit(greedy_request(c.prompt_ids, static_cast<int>(c.output_ids.size()), s)).ok());
      sinks.push_back(s);
    }
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait());
    const auto& c = g.cases[i % g.cases.size()];
    EXPECT_EQ(sinks[i]->ids, c.output_ids) << c.prompt;
    EXPECT_EQ(sinks[i]->final_event.finish_reason, FinishReason::kLength);
    EXPECT_EQ(sinks[i]->final_event.completion_tokens, static_cast<int>(c.output_ids.size()));
  }
  // Stats are published after the step that delivered the last events: wait for that.
  EngineStats st = e->stats();
  for (int i = 0; i < 200 && st.kv_blocks_used != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    st = e->stats();
  }
  EXPECT_GT(st.max_seqs_in_step, 1);  // the batch really was shared
  EXPECT_EQ(st.kv_blocks_used, 0);
}

// Scoring a prompt: each prompt token's log-probability equals the one it had when the engine
// generated it greedily (decoded one by one there, prefilled in 7-token chunks here: the kernels
// are chunk-invariant, so the values are the same bits), with the same alternatives. The prompt's
// event comes before any generated token; max_tokens 0 only scores; cached blocks are never
// reused for it (every position is computed), so a second scoring gives the same values.
TEST(LocalEngineTest, PromptLogprobsEqualTheLogprobsOfTheTokensGenerated) {
  auto e = make_engine(/*max_seqs=*/8, /*max_queue=*/64, /*prefix_caching=*/true);
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> prompt = test::load_golden("stories260K.json").cases.at(0).prompt_ids;
  constexpr int kGen = 20;
  auto gen = std::make_shared<CollectSink>();
  GenerationRequest g = greedy_request(prompt, kGen, gen);
  g.sampling.logprobs = true;
  g.sampling.top_logprobs = 3;
  ASSERT_TRUE(e->submit(std::move(g)).ok());
  ASSERT_TRUE(gen->wait());
  ASSERT_EQ(gen->ids.size(), static_cast<size_t>(kGen));
  EXPECT_EQ(gen->prompt_events, 0);

  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen->ids.begin(), gen->ids.end());
  for (int rep = 0; rep < 2; ++rep) {
    SCOPED_TRACE(rep);
    auto score = std::make_shared<CollectSink>();
    GenerationRequest r = greedy_request(all, 0, score);
    r.prompt_logprobs = true;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    ASSERT_TRUE(e->submit(std::move(r)).ok());
    ASSERT_TRUE(score->wait());
    EXPECT_EQ(score->final_event.finish_reason, FinishReason::kLength);
    EXPECT_EQ(score->final_event.completion_tokens, 0);
    EXPECT_EQ(score->final_event.cached_tokens, 0);
    EXPECT_TRUE(score->ids.empty());
    EXPECT_EQ(score->prompt_events, 1);
    ASSERT_EQ(score->prompt_chosen.size(), all.size());
    ASSERT_EQ(score->prompt_top.size(), all.size());
    EXPECT_TRUE(std::isnan(score->prompt_chosen[0].logprob));
    EXPECT_TRUE(score->prompt_top[0].empty());
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(score->prompt_chosen[i].token, all[i]) << i;
    for (int k = 0; k < kGen; ++k) {
      const size_t i = prompt.size() + static_cast<size_t>(k);
      EXPECT_EQ(score->prompt_chosen[i].logprob, gen->chosen[static_cast<size_t>(k)]) << k;
      ASSERT_EQ(score->prompt_top[i].size(), 3u);
      for (size_t a = 0; a < 3; ++a) {
        EXPECT_EQ(score->prompt_top[i][a].token, gen->top[static_cast<size_t>(k) * 3 + a].first) << k;
        EXPECT_EQ(score->prompt_top[i][a].logprob, gen->top[static_cast<size_t>(k) * 3 + a].second) << k;
      }
    }
    for (size_t i = 1; i < prompt.size(); ++i) {
      EXPECT_LE(score->prompt_chosen[i].logprob, 0.0f) << i;
      EXPECT_FALSE(score->prompt_chosen[i].text.empty()) << i;
    }
  }

  // Scoring and generating: the prompt's event first, then the same tokens as plain generation.
  auto both = std::make_shared<CollectSink>();
  GenerationRequest r = greedy_request(prompt, 5, both);
  r.prompt_logprobs = true;
  ASSERT_TRUE(e->submit(std::move(r)).ok());
  ASSERT_TRUE(both->wait());
  EXPECT_EQ(both->prompt_events, 1);
  EXPECT_EQ(both->tokens_before_prompt, 0);
  EXPECT_EQ(both->prompt_chosen.size(), prompt.size());
  EXPECT_EQ(both->ids, std::vector<int32_t>(gen->ids.begin(), gen->ids.begin() + 5));

  // max_tokens 0 is for scoring only.
  auto none = std::make_shared<CollectSink>();
  Result<uint64_t> refused = e->submit(greedy_request(prompt, 0, none));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("max_tokens must be at least 1"), std::string::npos);
}

TEST(LocalEngineTest, FinalEventTellsWhereTheRequestsTimeWent) {
  auto e = make_engine(/*max_seqs=*/1);
  ASSERT_NE(e, nullptr);
  // One sequence at a time: the second request waits in the queue while the first runs.
  auto first = std::make_shared<CollectSink>();
  auto second = std::make_shared<CollectSink>();
  const auto before_first = std::chrono::steady_clock::now();
  ASSERT_TRUE(e->submit(greedy_request({1, 403, 407, 3}, 24, first)).ok());
  ASSERT_TRUE(e->submit(greedy_request({1, 403, 407, 5}, 6, second)).ok());
  const double submit_gap = std::chrono::duration<double>(std::chrono::steady_clock::now() - before_first).count();
  ASSERT_TRUE(first->wait());
  ASSERT_TRUE(second->wait());
  for (const auto* s : {first.get(), second.get()}) {
    const GenerationEvent& f = s->final_event;
    EXPECT_TRUE(f.ran);
    EXPECT_GE(f.queue_seconds, 0);
    EXPECT_GT(f.prefill_seconds, 0);  // the prompt's forward pass ran before the first token
    EXPECT_GT(f.decode_seconds, 0);   // and more tokens followed it
  }
  EXPECT_EQ(first->final_event.max_tokens, 24);
  EXPECT_EQ(second->final_event.max_tokens, 6);
  // The second waited at least as long as the first took from its first step to its last token,
  // less the part of that which may have begun before the second was submitted (the engine can
  // schedule the first between the two submits).
  EXPECT_GE(second->final_event.queue_seconds + submit_gap,
            first->final_event.prefill_seconds + first->final_event.decode_seconds);
}

TEST(LocalEngineTest, CancelFreesBlocks) {
  auto e = make_engine();
  ASSERT_NE(e, nullptr);
  auto s = std::make_shared<CollectSink>();
  auto id = e->submit(greedy_request({1, 403, 407}, 400, s));
  ASSERT_TRUE(id.ok());
  while (true) {
    {
      if (e->stats().generation_tokens_total > 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  e->cancel(*id);
  ASSERT_TRUE(s->wait());
  EXPECT_EQ(s->final_event.finish_reason, FinishReason::kCancelled);
  for (int i = 0; i < 100 && e->stats().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  EXPECT_EQ(e->stats().kv_blocks_free, e->stats().kv_blocks_total);
}

TEST(LocalEngineTest, RefusesRequestsThatCanNeverRun) {
  auto e = make_engine();
  ASSERT_NE(e, nullptr);
  auto s = std::make_shared<CollectSink>();
  auto empty = e->submit(greedy_request({}, 4, s));
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> huge(600, 5);  // stories260K: 512-token context
  auto too_long = e->submit(greedy_request(huge, 4, s));
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_long.status().message().find("512"), std::string::npos);
  auto bad_id = e->submit(greedy_request({1, 99999}, 4, s));
  EXPECT_EQ(bad_id.status().code(), StatusCode::kInvalidArgument);
  auto zero = e->submit(greedy_request({1}, 0, s));
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  // Sampling parameters the sampler cannot use (a penalty of 0 divides by zero) are refused,
  // whoever sends them.
  GenerationRequest bad_penalty = greedy_request({1, 403}, 4, s);
  bad_penalty.sampling.repetition_penalty = 0;
  auto r = e->submit(std::move(bad_penalty));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("repetition_penalty must be > 0"), std::string::npos) << r.status().message();
  GenerationRequest nan_temp = greedy_request({1, 403}, 4, s);
  nan_temp.sampling.temperature = std::nanf("");
  EXPECT_EQ(e->submit(std::move(nan_temp)).status().code(), StatusCode::kInvalidArgument);
}

TEST(LocalEngineTest, OutputIsCutAtMaxModelLen) {
  auto e = make_engine();
  ASSERT_NE(e, nullptr);
  auto s = std::make_shared<CollectSink>();
  std::vector<int32_t> prompt(500, 5);
  prompt[0] = 1;
  ASSERT_TRUE(e->submit(greedy_request(prompt, 100, s)).ok());
  ASSERT_TRUE(s->wait());
  EXPECT_EQ(s->final_event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(s->final_event.completion_tokens, 12);
}

// A first-token deadline already past: the request fails with kDeadlineExceeded and no token,
// whether it is the only one or queued behind another; the others run as usual; a request that
// only scores its prompt (max_tokens 0) is exempt.
TEST(LocalEngineTest, FirstTokenDeadlineFailsOnlyTheLateRequest) {
  auto e = make_engine(/*max_seqs=*/1);
  ASSERT_NE(e, nullptr);
  const test::GoldenFile g = test::load_golden("stories260K.json");
  const auto& c = g.cases.at(0);
  auto a = std::make_shared<CollectSink>(), b = std::make_shared<CollectSink>(), s = std::make_shared<CollectSink>();
  ASSERT_TRUE(e->submit(greedy_request(c.prompt_ids, static_cast<int>(c.output_ids.size()), a)).ok());
  GenerationRequest late = greedy_request(c.prompt_ids, 8, b);
  late.first_token_deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  ASSERT_TRUE(e->submit(std::move(late)).ok());
  GenerationRequest scored = greedy_request(c.prompt_ids, 0, s);
  scored.prompt_logprobs = true;
  scored.first_token_deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  ASSERT_TRUE(e->submit(std::move(scored)).ok());
  ASSERT_TRUE(a->wait() && b->wait() && s->wait());
  EXPECT_EQ(b->final_event.finish_reason, FinishReason::kError);
  EXPECT_EQ(b->final_event.error.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(b->final_event.error.message().find("no first token"), std::string::npos) << b->final_event.error.message();
  EXPECT_TRUE(b->ids.empty());
  EXPECT_EQ(a->ids, c.output_ids);
  EXPECT_EQ(a->final_event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(s->final_event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(s->prompt_chosen.size(), c.prompt_ids.size());
}

TEST(LocalEngineTest, StopStringEndsGenerationWithoutEmittingIt) {
  auto e = make_engine();
  ASSERT_NE(e, nullptr);
  auto s = std::make_shared<CollectSink>();
  GenerationRequest r = greedy_request(e->tokenize("Once upon a time", true, false), 64, s);
  r.sampling.stop = {"Lily"};
  ASSERT_TRUE(e->submit(std::move(r)).ok());
  ASSERT_TRUE(s->wait());
  EXPECT_EQ(s->final_event.finish_reason, FinishReason::kStop);
  EXPECT_EQ(s->text, ", there was a little girl named ");
}

TEST(LocalEngineTest, QueueFullIsResourceExhaustedAndDrainRefuses) {
  auto e = make_engine(/*max_seqs=*/1, /*max_queue=*/1);
  ASSERT_NE(e, nullptr);
  std::vector<std::shared_ptr<CollectSink>> sinks;
  int rejected = 0;
  for (int i = 0; i < 6; ++i) {
    auto s = std::make_shared<CollectSink>();
    auto r = e->submit(greedy_request({1, 403}, 200, s));
    if (r.ok()) sinks.push_back(s);
    else if (r.status().code() == StatusCode::kResourceExhausted) ++rejected;
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(e->stats().queue_rejections_total, 0u);
  // One may run and one may wait: a burst of six gets (at least, should one finish meanwhile) two in.
  EXPECT_GE(sinks.size(), 2u);
  e->begin_drain();
  auto s = std::make_shared<CollectSink>();
  EXPECT_EQ(e->submit(greedy_request({1}, 2, s)).status().code(), StatusCode::kCancelled);
  EXPECT_TRUE(e->wait_idle(std::chrono::seconds(60)));
  for (auto& x : sinks) EXPECT_TRUE(x->wait());
}

// min_tokens holds back the tokens that would end the output: a stop token that greedy decoding
// picks first cannot come before min_tokens tokens.
TEST(LocalEngineTest, MinTokensHoldsBackStopTokens) {
  auto e = make_engine();
  ASSERT_NE(e, nullptr);
  auto first = std::make_shared<CollectSink>();
  ASSERT_TRUE(e->submit(greedy_request({1, 403}, 8, first)).ok());
  ASSERT_TRUE(first->wait());
  ASSERT_FALSE(first->ids.empty());
  const int32_t stop_tok = first->ids[0];
  auto run = [&](int32_t min_tokens) {
    auto s = std::make_shared<CollectSink>();
    GenerationRequest req = greedy_request({1, 403}, 8, s);
    req.sampling.stop_token_ids = {stop_tok};
    req.sampling.min_tokens = min_tokens;
    EXPECT_TRUE(e->submit(std::move(req)).ok());
    EXPECT_TRUE(s->wait());
    return s;
  };
  auto plain = run(0);
  EXPECT_EQ(plain->ids, std::vector<int32_t>{stop_tok});
  EXPECT_EQ(plain->final_event.finish_reason, FinishReason::kStop);
  auto held = run(3);
  ASSERT_GE(held->ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(held->ids[i], stop_tok) << i;
}

// --max-queue counts what waits beyond the running sequences: free slots take a burst at once,
// and --max-queue 0 still runs max_num_seqs requests.
TEST(LocalEngineTest, FreeSlotsAreNotQueue) {
  auto e = make_engine(/*max_seqs=*/3, /*max_queue=*/0);
  ASSERT_NE(e, nullptr);
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<CollectSink>());
    auto r = e->submit(greedy_request({1, 403}, 400, sinks.back()));
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().message();
  }
  // A fourth finds every slot taken (unless one of the three finished meanwhile).
  auto fourth = std::make_shared<CollectSink>();
  auto r = e->submit(greedy_request({1, 403}, 400, fourth));
  if (r.ok()) {
    sinks.push_back(fourth);
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(r.status().message().find("(0 waiting, --max-queue 0)"), std::string::npos) << r.status().message();
  }
  for (auto& x : sinks) EXPECT_TRUE(x->wait());
}

}  // namespace
}  // namespace hz
