#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hz {

Sampler::Sampler(const SamplingParams& params, uint64_t seed) : p_(params), state_(seed) {}

void Sampler::add_prompt_tokens(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) ++seen_[id];
}

void Sampler::accept(int32_t id) {
  if (p_.logit_mask) p_.logit_mask->accept(id);
  ++seen_[id];
  ++out_counts_[id];
}

double Sampler::uniform() {
  // splitmix64: small, fast, and identical on every platform.
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

void Sampler::apply_penalties(float* logits, int32_t vocab) {
  if (p_.repetition_penalty != 1.0f) {
    for (const auto& [id, n] : seen_) {
      if (id < 0 || id >= vocab) continue;
      float& l = logits[id];
      l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    }
  }
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    for (const auto& [id, n] : out_counts_) {
      if (id < 0 || id >= vocab) continue;
      logits[id] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(n);
    }
  }

  for (const auto& [id, bias] : p_.logit_bias) {
    if (id >= 0 && id < vocab) logits[id] += bias;
  }
  if (p_.logit_mask) p_.logit_mask->apply(logits, vocab);
}

double Sampler::log_normaliser(const float* logits, int32_t vocab, bool wanted) const {
  if (!wanted) return 0;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double z = 0;
  for (int32_t i = 0; i < vocab; ++i) z += std::exp(static_cast<double>(logits[i]) - max_logit);
  return std::log(z) + max_logit;
}

int32_t Sampler::sample(float* logits, int32_t vocab, TokenLogprob* chosen, std::vector<TokenLogprob>* top) {
  apply_penalties(logits, vocab);
  // Log-probabilities of the penalised (biased, masked) distribution (what OpenAI's logprobs report).
  const double log_z = log_normaliser(logits, vocab, chosen != nullptr || top != nullptr);
  int32_t result = 0;
  if (p_.temperature <= 0.0f) {
    for (int32_t i = 1; i < vocab; ++i) {
      if (logits[i] > logits[result]) result = i;  // ties: the lowest id
    }
  } else {
    result = sample_random(logits, vocab);
  }
  report_logprobs(logits, vocab, log_z, result, chosen, top);
  return result;
}

int32_t Sampler::sample_draft(float* logits, int32_t vocab, int32_t draft, const float* q, TokenLogprob* chosen,
                              std::vector<TokenLogprob>* top) {
  // A certain drafter (q one-hot at the draft): keeping the draft with probability p(draft), else
  // drawing from p without it, renormalised, is the same as drawing t ~ p and keeping the draft
  // when t == draft. Drawing as sample() does also consumes the generator alike, so a seeded
  // request gives the same tokens with and without speculation.
  if (p_.temperature <= 0.0f || draft < 0 || draft >= vocab || q == nullptr) return sample(logits, vocab, chosen, top);
  apply_penalties(logits, vocab);
  const double log_z = log_normaliser(logits, vocab, chosen != nullptr || top != nullptr);
  size_t keep = 0;
  const double total = candidates(logits, vocab, &keep);
  // p over the whole vocabulary (0 outside the kept candidates).
  residual_.assign(vocab, 0.0);
  for (size_t i = 0; i < keep; ++i) residual_[cand_[i].second] = probs_[i] / total;
  const double p_draft = residual_[draft];
  const double q_draft = static_cast<double>(q[draft]);
  int32_t result = draft;
  // Accept with probability min(1, p / q): u * q < p (a draft the drafter gave q = 0 is never drawn).
  if (!(uniform() * q_draft < p_draft)) {
    double sum = 0;
    for (int32_t i = 0; i < vocab; ++i) {
      const double qi = static_cast<double>(q[i]);
      residual_[i] = std::max(0.0, residual_[i] - qi);
      sum += residual_[i];
    }
    if (sum > 0) {
      double r = uniform() * sum;
      result = -1;
      for (int32_t i = 0; i < vocab && result < 0; ++i) {
        if (residual_[i] <= 0) continue;
        r -= residual_[i];
        if (r < 0) result = i;
      }
      if (result < 0) {  // rounding: the last token with mass
        for (int32_t i = vocab - 1; i >= 0 && result < 0; --i) {
          if (residual_[i] > 0) result = i;
        }
      }
    }
    // sum == 0 means p <= q everywhere, i.e. p == q: the draft is then always accepted above.
  }
  report_logprobs(logits, vocab, log_z, result, chosen, top);
  return result;
}

double Sampler::candidates(const float* logits, int32_t vocab, size_t* keep_out) {
  // Candidates sorted by logit (descending; ties by id), cut by top-k.
  cand_.clear();
  cand_.reserve(vocab);
  for (int32_t i = 0; i < vocab; ++i) cand_.emplace_back(logits[i], i);
  auto cmp = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t k = (p_.top_k > 0 && p_.top_k < vocab) ? static_cast<size_t>(p_.top_k) : cand_.size();
  std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), cmp);
  cand_.resize(k);
  // Softmax with temperature over the survivors.
  std::vector<double>& probs = probs_;
  probs.resize(k);
  double sum = 0;
  const double inv_t = 1.0 / p_.temperature;
  for (size_t i = 0; i < k; ++i) {
    probs[i] = std::exp((static_cast<double>(cand_[i].first) - cand_[0].first) * inv_t);
    sum += probs[i];
  }
  for (auto& p : probs) p /= sum;
  size_t keep = k;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < k; ++i) {
      cum += probs[i];
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.0f) {
    const double floor = probs[0] * p_.min_p;
    size_t n = 1;
    while (n < keep && probs[n] >= floor) ++n;
    keep = n;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs[i];
  *keep_out = keep;
  return total;
}

int32_t Sampler::sample_random(const float* logits, int32_t vocab) {
  size_t keep = 0;
  const double total = candidates(logits, vocab, &keep);
  double r = uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= probs_[i];
    if (r < 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

void Sampler::score(const float* logits, int32_t vocab, int32_t token, TokenLogprob* chosen,
                    std::vector<TokenLogprob>* top) const {
  report_logprobs(logits, vocab, log_normaliser(logits, vocab, true), token, chosen, top);
}

void Sampler::report_logprobs(const float* logits, int32_t vocab, double log_z, int32_t result, TokenLogprob* chosen,
                              std::vector<TokenLogprob>* top) const {
  if (chosen != nullptr) {
    chosen->token = result;
    chosen->logprob = static_cast<float>(logits[result] - log_z);
  }
  if (top != nullptr && p_.top_logprobs > 0) {
    int32_t n = std::min(p_.top_logprobs, vocab);
    std::vector<int32_t> idx(vocab);
    for (int32_t i = 0; i < vocab; ++i) idx[i] = i;
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    top->clear();
    for (int32_t i = 0; i < n; ++i) top->push_back({idx[i], "", static_cast<float>(logits[idx[i]] - log_z)});
  }
}

}  // namespace hz
