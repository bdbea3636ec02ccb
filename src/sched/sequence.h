// Sequence: the scheduler's view of one request — its KV state (kv/kv_seq.h: tokens, how many of
// them have K/V in the cache, its block table) and its identity. No model, sampling or I/O state
// (the runtime keeps that).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_seq.h"

namespace hz {

struct Sequence : KvSeq {
  uint64_t id = 0;
  int32_t num_prompt_tokens = 0;
  // Speculative decoding: tokens proposed to follow `tokens`, run with the next token in one step
  // and verified after it. Never part of `tokens` until accepted; dropped by the scheduler when the
  // step has no room for them (budget, blocks) and on preemption.
  std::vector<int32_t> draft;
  // Prompt tokens per step at most for this sequence (0: the scheduler's prefill_chunk). A scored
  // prompt (prompt logprobs) keeps every position's logits, so its chunks are kept small.
  int32_t max_chunk = 0;

  // Tokens still to be run through the model before the next token can be sampled.
  int64_t num_pending() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

}  // namespace hz
