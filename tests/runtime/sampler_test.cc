#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>

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

namespace hz {
namespace {

// Pearson chi-square of `counts` against probabilities `p` (cells with expected count >= 5; the
// rest pooled), and its degrees of freedom.
std::pair<double, int> chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0, pooled_obs = 0, pooled_exp = 0;
  int dof = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * n;
    if (e >= 5) {
      chi += (counts[i] - e) * (counts[i] - e) / e;
      ++dof;
    } else {
      pooled_obs += counts[i];
      pooled_exp += e;
      EXPECT_TRUE(p[i] > 0 || counts[i] == 0) << "token " << i << " has probability 0 but was drawn";
    }
  }
  if (pooled_exp >= 5) {
    chi += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++dof;
  }
  return {chi, dof};
}

// The target distribution sample() draws from, estimated exactly enough by many draws.
std::vector<double> target_probs(const SamplingParams& sp, const std::vector<float>& l) {
  // softmax(l / T) restricted as the sampler restricts it: top-k 0, top-p 1, min-p 0 here.
  std::vector<double> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] / sp.temperature);
  for (double& x : p) x /= z;
  return p;
}

TEST(SamplerDraftTest, RejectionRuleKeepsTheTargetDistribution) {
  SamplingParams sp;
  sp.temperature = 0.8f;
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f, -1.0f, 0.0f, 1.5f};
  const std::vector<double> p = target_probs(sp, l);
  const int vocab = static_cast<int>(l.size()), n = 40000;
  // A certain drafter (prompt lookup) proposing a likely, an unlikely and the likeliest token; then
  // a drafter with its own distribution q (a draft model).
  std::vector<float> q = {0.05f, 0.1f, 0.4f, 0.05f, 0.1f, 0.1f, 0.1f, 0.1f};
  struct Case {
    int32_t draft;
    const float* q;
  };
  for (const Case c : {Case{4, nullptr}, Case{5, nullptr}, Case{1, nullptr}, Case{-1, q.data()}}) {
    Sampler s(sp, 1234);
    std::vector<int> counts(vocab, 0);
    int kept = 0;
    // A drafter with a distribution draws its draft from it; a certain one always proposes c.draft.
    std::mt19937 gen(99);
    std::discrete_distribution<int32_t> from_q(q.begin(), q.end());
    for (int i = 0; i < n; ++i) {
      std::vector<float> row = l;
      const int32_t draft = c.q != nullptr ? from_q(gen) : c.draft;
      const int32_t t = s.sample_draft(row.data(), vocab, draft, c.q);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, vocab);
      ++counts[t];
      kept += t == draft ? 1 : 0;
    }
    const auto [chi, dof] = chi_square(counts, p, n);
    // 99.9% quantile of chi-square with 7 degrees of freedom: 24.3.
    EXPECT_EQ(dof, 7);
    EXPECT_LT(chi, 24.3) << "draft " << c.draft << (c.q ? " with q" : " certain");
    // A certain draft is kept as often as the target draws it.
    if (c.q == nullptr) EXPECT_NEAR(static_cast<double>(kept) / n, p[c.draft], 0.01);
  }
}

TEST(SamplerDraftTest, WrongDrafterFailsTheSameCheck) {
  // The check above can fail: a "verifier" that always keeps the draft is far from the target.
  SamplingParams sp;
  sp.temperature = 0.8f;
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f, -1.0f, 0.0f, 1.5f};
  const std::vector<double> p = target_probs(sp, l);
  std::vector<int> counts(l.size(), 0);
  const int n = 40000;
  Sampler s(sp, 1234);
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = l;
    const int32_t t = s.sample_draft(row.data(), static_cast<int32_t>(l.size()), 4);
    ++counts[i % 2 == 0 ? 4 : t];  // half the draws forced to the draft
  }
  EXPECT_GT(chi_square(counts, p, n).first, 24.3);
}

TEST(SamplerDraftTest, GreedyIsTheArgmaxWhateverTheDraft) {
  SamplingParams sp;
  sp.temperature = 0;
  Sampler s(sp, 1);
  for (int32_t d : {0, 1, 4}) {
    auto l = logits();
    EXPECT_EQ(s.sample_draft(l.data(), 5, d), 1);
  }
}

TEST(SamplerDraftTest, RestrictionsApplyToTheVerifiedToken) {
  // top-k 2: only tokens 1 and 4 can come out, whatever was drafted; logprobs as sample() reports.
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 2;
  sp.logprobs = true;
  Sampler s(sp, 7);
  int drafted_kept = 0;
  for (int i = 0; i < 2000; ++i) {
    auto l = logits();
    TokenLogprob lp;
    const int32_t t = s.sample_draft(l.data(), 5, i % 2 == 0 ? 2 : 4, nullptr, &lp);
    ASSERT_TRUE(t == 1 || t == 4) << t;
    EXPECT_EQ(lp.token, t);
    drafted_kept += (i % 2 == 1 && t == 4) ? 1 : 0;
  }
  // Token 4 has probability e^2.9 / (e^3 + e^2.9) = 0.475 among the two.
  EXPECT_NEAR(drafted_kept / 1000.0, 0.475, 0.05);
}

}  // namespace
}  // namespace hz
