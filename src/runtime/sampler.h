// Sampler: turns a logits row into the next token under SamplingParams (M10): penalties, logit
// bias, the logit mask (grammar), temperature, top-k, top-p, min-p, then a draw from a seeded
// generator (same seed, same output). accept() also advances the logit mask.
// Also computes log-probabilities of the chosen token and the top alternatives.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/engine_api.h"

namespace hz {

class Sampler {
 public:
  Sampler(const SamplingParams& params, uint64_t seed);

  // Tokens already in the sequence (prompt and output) for the penalties.
  void add_prompt_tokens(const std::vector<int32_t>& ids);
  void accept(int32_t id);  // a generated token

  // Picks the next token. `logits` is modified (penalties applied). When logprobs are asked,
  // `chosen` and `top` receive them (log-softmax of the penalised logits, before temperature).
  int32_t sample(float* logits, int32_t vocab, TokenLogprob* chosen = nullptr, std::vector<TokenLogprob>* top = nullptr);
  // Speculative decoding: the next token when a drafter proposed `draft` for this position, by the
  // standard rejection rule, so the result is distributed exactly as sample()'s: with p the
  // target distribution (penalties, temperature, top-k/p, min-p applied) and q the drafter's,
  // `draft` is kept with probability min(1, p(draft) / q(draft)), else a token is drawn from
  // max(0, p - q), renormalised. `q` has `vocab` entries; null means the drafter was certain (q is
  // one-hot at `draft`, as for prompt lookup: then the result is exactly sample()'s, same generator
  // draws included). Greedy (temperature 0): the argmax, as sample(). The caller compares the
  // result with `draft`.
  int32_t sample_draft(float* logits, int32_t vocab, int32_t draft, const float* q = nullptr, TokenLogprob* chosen = nullptr,
                       std::vector<TokenLogprob>* top = nullptr);
  // Scoring (prompt logprobs): `token`'s log-probability under the unmodified `logits` (no
  // penalties, bias, mask or temperature) into `chosen`, and top_logprobs alternatives into `top`.
  void score(const float* logits, int32_t vocab, int32_t token, TokenLogprob* chosen,
             std::vector<TokenLogprob>* top) const;

 private:
  double uniform();  // [0, 1)
  // Repetition, presence and frequency penalties, logit bias and the logit mask, in place.
  void apply_penalties(float* logits, int32_t vocab);
  // Top-k, temperature, top-p and min-p over the candidates, then one draw.
  int32_t sample_random(const float* logits, int32_t vocab);
  // The candidates sample_random() draws from: cand_ sorted (first `*keep` kept), probs_ their
  // softmax over the top-k survivors; returns the kept probabilities' sum.
  double candidates(const float* logits, int32_t vocab, size_t* keep);
  // Log-softmax normaliser of `logits` when log-probabilities are asked (else 0).
  double log_normaliser(const float* logits, int32_t vocab, bool wanted) const;
  // `chosen` and `top` (either may be null) from log-softmax normaliser `log_z`.
  void report_logprobs(const float* logits, int32_t vocab, double log_z, int32_t result, TokenLogprob* chosen,
                       std::vector<TokenLogprob>* top) const;

  SamplingParams p_;
  uint64_t state_;                                  // splitmix64 state
  std::unordered_map<int32_t, int32_t> seen_;       // prompt + output tokens (repetition penalty)
  std::unordered_map<int32_t, int32_t> out_counts_; // output tokens (presence / frequency)
  std::vector<std::pair<float, int32_t>> cand_;     // scratch
  std::vector<double> probs_;                       // scratch, parallel to cand_
  std::vector<double> residual_;                    // scratch: [vocab]
};

}  // namespace hz
