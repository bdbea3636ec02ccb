// Prefix caching end to end on synth-tiny-f16 (head dim 32, native context 131072): two
// generations share a 2,000-token prefix; the second attaches the cached blocks and prefills only
// its suffix (the counters and cached_tokens prove it), and its logits (log-probabilities of the
// top 20 tokens at every step) are bit-identical to a run without caching. For f16 and int8 KV.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <random>
#include <utility>

#include "runtime/local_engine.h"
#include "support/collect_sink.h"
#include "support/test_support.h"

namespace hz {
namespace {

using test::CollectSink;

std::unique_ptr<LocalEngine> make_engine(bool caching, KvType type, int32_t hot_window = 0,
                                         KvType cold = KvType::kInt8, int32_t sink_tokens = 0) {
  EngineOptions o;
  o.model_path = test::model_path("synth-tiny-f16.gguf");
  o.threads = 2;
  o.max_model_len = 4096;
  o.max_num_seqs = 2;
  o.prefill_chunk = 512;
  o.max_num_batched_tokens = 512;
  o.kv_dtype = type;
  o.enable_prefix_caching = caching;
  o.kv_hot_window = hot_window;
  o.kv_cold_dtype = cold;
  o.kv_sink_tokens = sink_tokens;
  o.kv_budget_bytes = 16u << 20;
  auto e = LocalEngine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::shared_ptr<CollectSink> generate(LocalEngine& e, std::vector<int32_t> prompt) {
  auto sink = std::make_shared<CollectSink>();
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 4;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 20;
  r.sink = sink;
  auto id = e.submit(std::move(r));
  EXPECT_TRUE(id.ok()) << id.status().message();
  EXPECT_TRUE(sink->wait());
  EXPECT_TRUE(e.wait_idle(std::chrono::seconds(60)));  // the stats snapshot is published after the step
  return sink;
}

// Two prompts sharing a random `prefix_len`-token prefix, then 30 and 37 tokens of their own.
std::pair<std::vector<int32_t>, std::vector<int32_t>> two_prompts(std::mt19937& rng, int prefix_len) {
  std::vector<int32_t> a(static_cast<size_t>(prefix_len));
  for (auto& t : a) t = 3 + static_cast<int32_t>(rng() % 509);
  std::vector<int32_t> b = a;
  for (int i = 0; i < 30; ++i) a.push_back(3 + static_cast<int32_t>(rng() % 509));
  for (int i = 0; i < 37; ++i) b.push_back(3 + static_cast<int32_t>(rng() % 509));
  return {std::move(a), std::move(b)};
}

class PrefixCacheEngineTest : public ::testing::TestWithParam<KvType> {};

TEST_P(PrefixCacheEngineTest, SecondGenerationPrefillsOnlyTheSuffixWithIdenticalLogits) {
  std::mt19937 rng(42);
  const auto [a, b] = two_prompts(rng, 2000);

  auto cached = make_engine(true, GetParam());
  ASSERT_NE(cached, nullptr);
  auto first = generate(*cached, a);
  EXPECT_EQ(first->final_event.cached_tokens, 0);
  EngineStats s1 = cached->stats();
  EXPECT_EQ(s1.prefix_cache_hits, 0u);
  EXPECT_GT(s1.kv_blocks_cached, 125);  // the finished request's full blocks stay cached

  auto second = generate(*cached, b);
  EngineStats s2 = cached->stats();
  // 2,000 = 125 blocks of 16: all attached; the 37-token suffix is the only prefill.
  EXPECT_EQ(second->final_event.cached_tokens, 2000);
  EXPECT_EQ(s2.prefix_cache_hits - s1.prefix_cache_hits, 125u);
  EXPECT_EQ(s2.prefix_cache_queries - s1.prefix_cache_queries, (2037u - 1) / 16);
  EXPECT_EQ(second->final_event.prompt_tokens, 2037);

  auto plain = make_engine(false, GetParam());
  ASSERT_NE(plain, nullptr);
  auto reference = generate(*plain, b);
  EXPECT_EQ(reference->final_event.cached_tokens, 0);
  EXPECT_EQ(plain->stats().prefix_cache_queries, 0u);
  ASSERT_EQ(second->ids, reference->ids);
  ASSERT_EQ(second->chosen.size(), reference->chosen.size());
  ASSERT_EQ(second->top.size(), reference->top.size());
  EXPECT_EQ(0, std::memcmp(second->chosen.data(), reference->chosen.data(), second->chosen.size() * sizeof(float)));
  for (size_t i = 0; i < second->top.size(); ++i) {
    EXPECT_EQ(second->top[i].first, reference->top[i].first) << i;
    EXPECT_EQ(0, std::memcmp(&second->top[i].second, &reference->top[i].second, sizeof(float))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PrefixCacheEngineTest, ::testing::Values(KvType::kF16, KvType::kInt8),
                         [](const auto& info) { return std::string(kv_type_name(info.param)); });

void expect_same_logits(const CollectSink& got, const CollectSink& want) {
  ASSERT_EQ(got.ids, want.ids);
  ASSERT_EQ(got.chosen.size(), want.chosen.size());
  ASSERT_EQ(got.top.size(), want.top.size());
  EXPECT_EQ(0, std::memcmp(got.chosen.data(), want.chosen.data(), got.chosen.size() * sizeof(float)));
  for (size_t i = 0; i < got.top.size(); ++i) {
    EXPECT_EQ(got.top[i].first, want.top[i].first) << i;
    EXPECT_EQ(0, std::memcmp(&got.top[i].second, &want.top[i].second, sizeof(float))) << i;
  }
}

// Prefix caching with a 64-token hot window (f16) over a cold int4 / int8 arena: the second
// generation attaches the whole 2,000-token prefix — the blocks its first queries read hot as
// private copies of their retained hot form — and its logits are bit-identical to a run without
// caching under the same position rule. A third request that continues the first conversation
// (its prompt, output and more) attaches that too.
class PrefixCacheHotWindowTest : public ::testing::TestWithParam<KvType> {};

TEST_P(PrefixCacheHotWindowTest, AttachedPrefixGivesIdenticalLogits) {
  std::mt19937 rng(7);
  const auto [a, b] = two_prompts(rng, 2000);

  auto cached = make_engine(true, KvType::kF16, 64, GetParam());
  ASSERT_NE(cached, nullptr);
  auto first = generate(*cached, a);
  EXPECT_EQ(first->final_event.cached_tokens, 0);
  EngineStats s1 = cached->stats();
  EXPECT_EQ(s1.prefix_cache_hits, 0u);

  auto second = generate(*cached, b);
  EngineStats s2 = cached->stats();
  EXPECT_EQ(second->final_event.cached_tokens, 2000);
  EXPECT_EQ(s2.prefix_cache_hits - s1.prefix_cache_hits, 125u);
  EXPECT_EQ(s2.prefix_cache_queries - s1.prefix_cache_queries, (2037u - 1) / 16);

  // The first conversation continued: its 2,030 prompt tokens, the 4 generated, 20 more.
  std::vector<int32_t> c = a;
  c.insert(c.end(), first->ids.begin(), first->ids.end());
  for (int i = 0; i < 20; ++i) c.push_back(3 + static_cast<int32_t>(rng() % 509));
  auto third = generate(*cached, c);
  EngineStats s3 = cached->stats();
  // Full blocks of the first sequence's 2,033 computed positions: 127, all attachable.
  EXPECT_EQ(third->final_event.cached_tokens, 127 * 16);
  EXPECT_EQ(s3.prefix_cache_hits - s2.prefix_cache_hits, 127u);

  auto plain = make_engine(false, KvType::kF16, 64, GetParam());
  ASSERT_NE(plain, nullptr);
  auto ref_b = generate(*plain, b);
  EXPECT_EQ(ref_b->final_event.cached_tokens, 0);
  expect_same_logits(*second, *ref_b);
  auto ref_c = generate(*plain, c);
  expect_same_logits(*third, *ref_c);
  EXPECT_EQ(plain->stats().prefix_cache_queries, 0u);
}

// When the hot form of the blocks at the end of a match is gone (not retained), a sequence
// attaches a shorter prefix or none, and still computes the same logits.
TEST(PrefixCacheHotWindowOptionsTest, WithoutRetainedHotFormsFallsBackCorrectly) {
  std::mt19937 rng(9);
  std::vector<int32_t> prefix(1000);
  for (auto& t : prefix) t = 3 + static_cast<int32_t>(rng() % 509);
  std::vector<int32_t> a = prefix, b(prefix.begin(), prefix.begin() + 500);
  for (int i = 0; i < 1500; ++i) a.push_back(3 + static_cast<int32_t>(rng() % 509));  // pushes b's blocks out
  for (int i = 0; i < 21; ++i) b.push_back(3 + static_cast<int32_t>(rng() % 509));
  auto cached = make_engine(true, KvType::kF16, 64, KvType::kInt4);
  ASSERT_NE(cached, nullptr);
  generate(*cached, a);
  EngineStats s1 = cached->stats();
  auto got = generate(*cached, b);
  EngineStats s2 = cached->stats();
  EXPECT_LT(got->final_event.cached_tokens, 496);  // 31 blocks matched, not all attachable
  EXPECT_EQ(s2.prefix_cache_hits - s1.prefix_cache_hits, static_cast<uint64_t>(got->final_event.cached_tokens / 16));
  auto plain = make_engine(false, KvType::kF16, 64, KvType::kInt4);
  ASSERT_NE(plain, nullptr);
  expect_same_logits(*got, *generate(*plain, b));
}

// Sink tokens (the first block kept hot for every query) with prefix caching: a sequence that
// attaches a cached prefix gets a private copy of its sink block's hot form, like the newest
// blocks, so a shared block never has to stay hot; logits are bit-identical to a run without
// caching, and the sink count is part of the prefix-cache identity (the precision name).
TEST(PrefixCacheSinkTest, SinkBlocksAttachAsPrivateHotCopies) {
  std::mt19937 rng(5);
  const auto [a, b] = two_prompts(rng, 1000);
  auto cached = make_engine(true, KvType::kF16, 64, KvType::kInt2, 4);
  ASSERT_NE(cached, nullptr);
  generate(*cached, a);
  auto second = generate(*cached, b);
  EXPECT_EQ(second->final_event.cached_tokens, 992);  // 62 full blocks of the prefix
  auto plain = make_engine(false, KvType::kF16, 64, KvType::kInt2, 4);
  ASSERT_NE(plain, nullptr);
  expect_same_logits(*second, *generate(*plain, b));
  // Without sinks the first block is read cold: different logits, so the sink block mattered.
  auto no_sinks = make_engine(false, KvType::kF16, 64, KvType::kInt2, 0);
  ASSERT_NE(no_sinks, nullptr);
  auto other = generate(*no_sinks, b);
  EXPECT_NE(0, std::memcmp(other->chosen.data(), second->chosen.data(), other->chosen.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(ColdTypes, PrefixCacheHotWindowTest, ::testing::Values(KvType::kInt4, KvType::kInt8),
                         [](const auto& info) { return std::string(kv_type_name(info.param)); });

}  // namespace
}  // namespace hz
