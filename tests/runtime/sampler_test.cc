#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "runtime/stop_matcher.h"

namespace hz {
namespace {

std::vector<float> logits() { return {1.0f, 3.0f, 2.0f, 0.5f, 2.9f}; }

TEST(SamplerTest, GreedyPicksArgmax) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 1);
  auto l = logits();
  EXPECT_EQ(s.sample(l.data(), 5), 1);
}

TEST(SamplerTest, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  Sampler a(p, 42), b(p, 42), c(p, 43);
  std::vector<int32_t> ra, rb, rc;
  for (int i = 0; i < 50; ++i) {
    auto l1 = logits(), l2 = logits(), l3 = logits();
    ra.push_back(a.sample(l1.data(), 5));
    rb.push_back(b.sample(l2.data(), 5));
    rc.push_back(c.sample(l3.data(), 5));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(SamplerTest, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p, 3);
  for (int i = 0; i < 20; ++i) {
    auto l = logits();
    EXPECT_EQ(s.sample(l.data(), 5), 1);
  }
}

TEST(SamplerTest, TopPAndMinPRestrictCandidates) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // keeps tokens with prob >= half the best: ids 1 and 4 (3.0 vs 2.9)
  Sampler s(p, 9);
  for (int i = 0; i < 100; ++i) {
    auto l = logits();
    int32_t t = s.sample(l.data(), 5);
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
  SamplingParams q;
  q.temperature = 1.0f;
  q.top_p = 0.01f;  // only the best survives
  Sampler s2(q, 9);
  for (int i = 0; i < 20; ++i) {
    auto l = logits();
    EXPECT_EQ(s2.sample(l.data(), 5), 1);
  }
}

TEST(SamplerTest, RepetitionAndFrequencyPenalties) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  Sampler s(p, 1);
  s.add_prompt_tokens({1});
  auto l = logits();
  EXPECT_EQ(s.sample(l.data(), 5), 4);  // 3.0 / 2 = 1.5 < 2.9
  SamplingParams q;
  q.temperature = 0;
  q.frequency_penalty = 0.5f;
  Sampler f(q, 1);
  f.accept(1);
  auto l2 = logits();
  EXPECT_EQ(f.sample(l2.data(), 5), 4);  // 3.0 - 0.5
}

TEST(SamplerTest, LogprobsAreLogSoftmax) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 2;
  Sampler s(p, 1);
  auto l = logits();
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  s.sample(l.data(), 5, &chosen, &top);
  double z = 0;
  for (float x : logits()) z += std::exp(x);
  EXPECT_NEAR(chosen.logprob, 3.0 - std::log(z), 1e-5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 4);
}

TEST(StopMatcherTest, HoldsBackPossiblePrefixAndCutsAtMatch) {
  StopMatcher m({"END"});
  bool stopped = false;
  EXPECT_EQ(m.push("hello E", &stopped), "hello ");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(m.push("N", &stopped), "");
  EXPECT_EQ(m.push("Dx", &stopped), "");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(m.push("more", &stopped), "");
}

TEST(StopMatcherTest, ReleasesFalseAlarmsAndFlushes) {
  StopMatcher m({"END", "\n\n"});
  bool stopped = false;
  EXPECT_EQ(m.push("EN", &stopped), "");
  EXPECT_EQ(m.push("x\n", &stopped), "ENx");
  EXPECT_EQ(m.flush(), "\n");
}

TEST(SamplerTest, LogitBiasOfHundredWinsGreedy) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{3, 100.0f}, {1, -100.0f}};
  Sampler s(p, 1);
  auto l = logits();
  EXPECT_EQ(s.sample(l.data(), 5), 3);
}

// Allows one token; records what the sampler accepted.
class OnlyToken : public LogitMask {
 public:
  explicit OnlyToken(int32_t id) : id_(id) {}
  void apply(float* logits, int32_t vocab) override {
    for (int32_t i = 0; i < vocab; ++i) {
      if (i != id_) logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  void accept(int32_t token) override { accepted.push_back(token); }
  std::vector<int32_t> accepted;

 private:
  int32_t id_;
};

TEST(SamplerTest, LogitMaskRestrictsEverySamplingMode) {
  for (float temp : {0.0f, 1.0f, 2.0f}) {
    SamplingParams p;
    p.temperature = temp;
    p.top_p = 0.5f;
    auto mask = std::make_shared<OnlyToken>(3);
    p.logit_mask = mask;
    Sampler s(p, 7);
    for (int i = 0; i < 20; ++i) {
      auto l = logits();
      TokenLogprob chosen;
      std::vector<TokenLogprob> top;
      const int32_t t = s.sample(l.data(), 5, &chosen, &top);
      EXPECT_EQ(t, 3);
      EXPECT_NEAR(chosen.logprob, 0.0f, 1e-6);  // the only allowed token has probability 1
      s.accept(t);
    }
    EXPECT_EQ(mask->accepted, std::vector<int32_t>(20, 3));
  }
}

}  // namespace
}  // namespace hz
