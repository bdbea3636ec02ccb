// Speculative decoding through the whole engine: greedy output token for token that of plain
// decoding (many sequences per step, compact KV types with rollback across block boundaries,
// prefix caching), sampled output in the target distribution, grammars left alone, counters.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "runtime/local_engine.h"
#include "stats/snapshot.h"
#include "support/collect_sink.h"
#include "support/golden.h"
#include "support/test_support.h"

namespace hz {
namespace {

using test::CollectSink;

struct Variant {
  const char* name;
  std::function<void(EngineOptions&)> set;
};

std::unique_ptr<LocalEngine> make_engine(SpecMode spec, const std::function<void(EngineOptions&)>& set = nullptr) {
  EngineOptions o;
  o.model_path = test::model_path("stories260K.gguf");
  o.threads = 2;
  o.max_num_seqs = 6;
  o.max_num_batched_tokens = 48;
  o.prefill_chunk = 7;  // prompts split and interleaved with speculative decodes
  o.spec = spec;
  o.spec_draft_tokens = 5;
  // Drafts of a fixed length at every step (adaptive drafting depends on timings).
  o.spec_adaptive = false;
  if (set) set(o);
  auto e = LocalEngine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

GenerationRequest request(std::vector<int32_t> prompt, int n, std::shared_ptr<GenerationSink> sink, float temp = 0,
                          uint64_t seed = 1) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = temp;
  r.sampling.seed = seed;
  r.sampling.max_tokens = n;
  r.sampling.ignore_eos = true;
  r.sink = std::move(sink);
  return r;
}

// Prompts: the golden cases, and texts whose continuation sits in the context (P + greedy(P) + P).
std::vector<std::vector<int32_t>> prompts(LocalEngine& plain) {
  std::vector<std::vector<int32_t>> out;
  test::GoldenFile g = test::load_golden("stories260K.json");
  for (const auto& c : g.cases) out.push_back(c.prompt_ids);
  for (const char* p : {"Once upon a time, there was a little girl named Lily.", "Tom had a red ball. He liked to"}) {
    std::vector<int32_t> ids = plain.tokenize(p, true, false);
    auto sink = std::make_shared<CollectSink>();
    EXPECT_TRUE(plain.submit(request(ids, 40, sink)).ok());
    EXPECT_TRUE(sink->wait());
    std::vector<int32_t> x = ids;
    x.insert(x.end(), sink->ids.begin(), sink->ids.end());
    x.insert(x.end(), ids.begin() + 1, ids.end());  // P again, without BOS
    out.push_back(x);
  }
  return out;
}

std::vector<std::vector<int32_t>> run_all(LocalEngine& e, const std::vector<std::vector<int32_t>>& ps, int n) {
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (const auto& p : ps) {
    auto s = std::make_shared<CollectSink>();
    EXPECT_TRUE(e.submit(request(p, n, s)).ok());
    sinks.push_back(s);
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& s : sinks) {
    EXPECT_TRUE(s->wait());
    EXPECT_EQ(s->final_event.finish_reason, FinishReason::kLength);
    out.push_back(s->ids);
  }
  return out;
}

EngineStats settled_stats(LocalEngine& e) {
  e.wait_idle(std::chrono::seconds(10));
  EngineStats st = e.stats();
  for (int i = 0; i < 200 && st.kv_blocks_used != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    st = e.stats();
  }
  return st;
}

// A request with `speculate` false is never drafted for on a speculating engine (bench spec runs
// its plain side so) and decodes the same tokens; the next request with it on drafts again.
TEST(SpeculativeEngineTest, ARequestCanOptOutOfDrafting) {
  auto spec = make_engine(SpecMode::kNgram);
  ASSERT_NE(spec, nullptr);
  const auto ps = prompts(*spec);
  const std::vector<int32_t>& p = ps.back();  // P + greedy(P) + P: drafts found at every step
  auto off = std::make_shared<CollectSink>();
  GenerationRequest r = request(p, 32, off);
  r.speculate = false;
  ASSERT_TRUE(spec->submit(std::move(r)).ok());
  ASSERT_TRUE(off->wait());
  const uint64_t drafted_before = settled_stats(*spec).spec_draft_tokens_total;
  const uint64_t steps_before = settled_stats(*spec).steps_total;
  auto again = std::make_shared<CollectSink>();
  GenerationRequest r2 = request(p, 32, again);
  r2.speculate = false;
  ASSERT_TRUE(spec->submit(std::move(r2)).ok());
  ASSERT_TRUE(again->wait());
  EngineStats st = settled_stats(*spec);
  EXPECT_EQ(st.spec_draft_tokens_total, drafted_before);
  const uint64_t steps_off = st.steps_total - steps_before;
  auto on = std::make_shared<CollectSink>();
  ASSERT_TRUE(spec->submit(request(p, 32, on)).ok());
  ASSERT_TRUE(on->wait());
  st = settled_stats(*spec);
  EXPECT_GT(st.spec_draft_tokens_total, drafted_before);
  EXPECT_LT(st.steps_total - steps_before - steps_off, steps_off);  // accepted drafts: fewer steps
  EXPECT_EQ(on->ids, off->ids);
  EXPECT_EQ(again->ids, off->ids);
}

TEST(SpeculativeEngineTest, GreedyOutputIsPlainDecodingTokenForToken) {
  const std::vector<Variant> variants = {
      {"f16", nullptr},
      // Compact blocks are encoded when finalized: rejected positions must never finalize a block.
      {"int8", [](EngineOptions& o) { o.kv_dtype = KvType::kInt8; }},
      {"f16 hot window 16, int4 cold",
       [](EngineOptions& o) {
         o.kv_hot_window = 16;
         o.kv_cold_dtype = KvType::kInt4;
       }},
      {"prefix caching", [](EngineOptions& o) { o.enable_prefix_caching = true; }},
      {"draft 2, 1-grams",
       [](EngineOptions& o) {
         o.spec_draft_tokens = 2;
         o.spec_ngram_min = 1;
       }},
      {"adaptive", [](EngineOptions& o) { o.spec_adaptive = true; }},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto plain = make_engine(SpecMode::kOff, v.set);
    auto spec = make_engine(SpecMode::kNgram, v.set);
    ASSERT_NE(plain, nullptr);
    ASSERT_NE(spec, nullptr);
    const auto ps = prompts(*plain);
    // Twice: with prefix caching the second round attaches the first round's blocks.
    for (int round = 0; round < 2; ++round) {
      const auto want = run_all(*plain, ps, 48);
      const auto got = run_all(*spec, ps, 48);
      for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i << " round " << round;
    }
    const EngineStats st = settled_stats(*spec);
    EXPECT_EQ(st.kv_blocks_used, 0);  // every block of rejected positions came back
    EXPECT_GT(st.spec_draft_tokens_total, 0u);
    if (std::string(v.name) == "adaptive") continue;  // how much it drafts depends on timings
    EXPECT_GT(st.spec_accepted_tokens_total, 0u);
    EXPECT_LT(st.spec_accepted_tokens_total, st.spec_draft_tokens_total);  // rollbacks happened
    EXPECT_GT(st.max_seqs_in_step, 1);
    EXPECT_EQ(settled_stats(*plain).spec_draft_tokens_total, 0u);
    // Fewer steps than tokens: drafts were accepted in batches.
    EXPECT_LT(st.steps_total, settled_stats(*plain).steps_total);
  }
}

// Counts of the token at output position `at` over requests seeded 1..n.
std::map<int32_t, int> token_counts(LocalEngine& e, const std::vector<int32_t>& prompt, int n, int at, float temp) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; i += 8) {
    std::vector<std::shared_ptr<CollectSink>> sinks;
    for (int j = i; j < std::min(n, i + 8); ++j) {
      auto s = std::make_shared<CollectSink>();
      EXPECT_TRUE(e.submit(request(prompt, at + 1, s, temp, 1000 + j)).ok());
      sinks.push_back(s);
    }
    for (auto& s : sinks) {
      EXPECT_TRUE(s->wait());
      if (static_cast<int>(s->ids.size()) > at) ++counts[s->ids[at]];
    }
  }
  return counts;
}

// Two-sample chi-square (equal sample sizes) over tokens seen at least 10 times in all, the rest
// pooled; returns the statistic divided by its 99.9% quantile (Wilson-Hilferty).
double chi_square_ratio(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b) {
  std::map<int32_t, std::pair<int, int>> both;
  for (auto [t, c] : a) both[t].first += c;
  for (auto [t, c] : b) both[t].second += c;
  double chi = 0;
  int cells = 0, pa = 0, pb = 0;
  for (auto [t, ab] : both) {
    if (ab.first + ab.second >= 10) {
      chi += static_cast<double>(ab.first - ab.second) * (ab.first - ab.second) / (ab.first + ab.second);
      ++cells;
    } else {
      pa += ab.first;
      pb += ab.second;
    }
  }
  if (pa + pb > 0) {
    chi += static_cast<double>(pa - pb) * (pa - pb) / (pa + pb);
    ++cells;
  }
  const double k = std::max(1, cells - 1), z = 3.09;
  const double q = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  return chi / q;
}

TEST(SpeculativeEngineTest, SeededSampledOutputIsTheSameTokens) {
  // Prompt lookup is a certain drafter: verification draws as plain sampling does (see
  // Sampler::sample_draft), so a seed gives the same tokens with and without speculation.
  auto plain = make_engine(SpecMode::kOff);
  auto spec = make_engine(SpecMode::kNgram, [](EngineOptions& o) { o.spec_ngram_min = 1; });
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  const auto ps = prompts(*plain);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    for (const auto& p : ps) {
      auto a = std::make_shared<CollectSink>();
      auto b = std::make_shared<CollectSink>();
      GenerationRequest ra = request(p, 40, a, 0.7f, seed);
      ra.sampling.top_k = 20;
      ra.sampling.logprobs = true;
      GenerationRequest rb = ra;
      rb.sink = b;
      ASSERT_TRUE(plain->submit(std::move(ra)).ok());
      ASSERT_TRUE(spec->submit(std::move(rb)).ok());
      ASSERT_TRUE(a->wait());
      ASSERT_TRUE(b->wait());
      EXPECT_EQ(b->ids, a->ids);
      EXPECT_EQ(b->chosen, a->chosen);
    }
  }
  const EngineStats st = settled_stats(*spec);
  EXPECT_GT(st.spec_accepted_tokens_total, 0u);
  EXPECT_LT(st.spec_accepted_tokens_total, st.spec_draft_tokens_total);
}

TEST(SpeculativeEngineTest, SampledOutputKeepsTheTargetDistribution) {
  auto plain = make_engine(SpecMode::kOff);
  auto spec = make_engine(SpecMode::kNgram, [](EngineOptions& o) { o.spec_ngram_min = 1; });
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  // A text that repeats: after its first sampled token the drafter finds continuations at once.
  std::vector<int32_t> p = plain->tokenize("Tom had a red ball. Tom had a red ball. Tom had a red", true, false);
  const int n = 600;
  for (int at : {1, 2}) {
    SCOPED_TRACE(at);
    const auto want = token_counts(*plain, p, n, at, 0.9f);
    const auto got = token_counts(*spec, p, n, at, 0.9f);
    EXPECT_GT(want.size(), 3u);  // really sampled
    EXPECT_LT(chi_square_ratio(want, got), 1.0);
    // The check has power: another temperature is told apart.
    if (at == 1) {
      EXPECT_GT(chi_square_ratio(want, token_counts(*plain, p, n, at, 0.5f)), 1.0);
    }
  }
  const EngineStats st = settled_stats(*spec);
  EXPECT_GT(st.spec_accepted_tokens_total, 0u);
  EXPECT_LT(st.spec_accepted_tokens_total, st.spec_draft_tokens_total);
}

TEST(SpeculativeEngineTest, PenaltiesAndLogitBiasSeeTheAcceptedTokens) {
  // The sampler's state (penalties count the output so far) advances token by token through a
  // verified run, so each row is sampled as plain decoding would have.
  auto plain = make_engine(SpecMode::kOff);
  auto spec = make_engine(SpecMode::kNgram, [](EngineOptions& o) { o.spec_ngram_min = 1; });
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  const auto ps = prompts(*plain);
  for (const auto& p : ps) {
    auto a = std::make_shared<CollectSink>();
    auto b = std::make_shared<CollectSink>();
    GenerationRequest ra = request(p, 40, a);
    ra.sampling.repetition_penalty = 1.2f;
    ra.sampling.presence_penalty = 0.3f;
    ra.sampling.frequency_penalty = 0.2f;
    ra.sampling.logit_bias = {{p.back(), 2.0f}};
    GenerationRequest rb = ra;
    rb.sink = b;
    ASSERT_TRUE(plain->submit(std::move(ra)).ok());
    ASSERT_TRUE(spec->submit(std::move(rb)).ok());
    ASSERT_TRUE(a->wait());
    ASSERT_TRUE(b->wait());
    EXPECT_EQ(b->ids, a->ids);
  }
  EXPECT_GT(settled_stats(*spec).spec_accepted_tokens_total, 0u);
}

class AllowAll : public LogitMask {
 public:
  void apply(float*, int32_t) override {}
  void accept(int32_t) override {}
};

TEST(SpeculativeEngineTest, RequestsWithAGrammarAreNotSpeculated) {
  auto spec = make_engine(SpecMode::kNgram);
  auto plain = make_engine(SpecMode::kOff);
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(plain, nullptr);
  const auto ps = prompts(*plain);
  auto sink = std::make_shared<CollectSink>();
  GenerationRequest r = request(ps.back(), 32, sink);
  r.sampling.logit_mask = std::make_shared<AllowAll>();
  ASSERT_TRUE(spec->submit(std::move(r)).ok());
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->ids, run_all(*plain, {ps.back()}, 32)[0]);
  EngineStats st = settled_stats(*spec);
  EXPECT_EQ(st.spec_draft_tokens_total, 0u);
  // The same request without the mask is speculated.
  run_all(*spec, {ps.back()}, 32);
  st = settled_stats(*spec);
  EXPECT_GT(st.spec_draft_tokens_total, 0u);
  // /metrics shows the counters and the rate.
  stats::Snapshot snap;
  st.collect(snap);
  ASSERT_NE(snap.find("horizon_spec_draft_tokens_total"), nullptr);
  ASSERT_NE(snap.find("horizon_spec_accepted_tokens_total"), nullptr);
  const stats::Family* rate = snap.find("horizon_spec_acceptance_rate");
  ASSERT_NE(rate, nullptr);
  ASSERT_EQ(rate->series.size(), 1u);
  EXPECT_NEAR(std::get<double>(rate->series[0].value),
              static_cast<double>(st.spec_accepted_tokens_total) / st.spec_draft_tokens_total, 1e-12);
}

TEST(SpeculativeEngineTest, BadSpeculationOptionsAreRefused) {
  EngineOptions o;
  o.model_path = test::model_path("stories260K.gguf");
  o.spec = SpecMode::kNgram;
  o.spec_draft_tokens = 0;
  auto e = LocalEngine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--spec-draft"), std::string::npos);
  o.spec_draft_tokens = 4;
  o.spec_ngram_min = 3;
  o.spec_ngram_max = 2;
  e = LocalEngine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--spec-ngram-min"), std::string::npos);
}

}  // namespace
}  // namespace hz
