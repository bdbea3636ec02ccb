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

 private:
  double uniform();  // [0, 1)
  // Repetition, presence and frequency penalties, logit bias and the logit mask, in place.
  void apply_penalties(float* logits, int32_t vocab);
  // Top-k, temperature, top-p and min-p over the candidates, then one draw.
  int32_t sample_random(const float* logits, int32_t vocab);
  // `chosen` and `top` (either may be null) from log-softmax normaliser `log_z`.
  void report_logprobs(const float* logits, int32_t vocab, double log_z, int32_t result, TokenLogprob* chosen,
                       std::vector<TokenLogprob>* top) const;

  SamplingParams p_;
  uint64_t state_;                                  // splitmix64 state
  std::unordered_map<int32_t, int32_t> seen_;       // prompt + output tokens (repetition penalty)
  std::unordered_map<int32_t, int32_t> out_counts_; // output tokens (presence / frequency)
  std::vector<std::pair<float, int32_t>> cand_;     // scratch
};

}  // namespace hz
