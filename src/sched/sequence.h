// Sequence: the scheduler's view of one request — its tokens, how many of them have K/V in the
// cache, and its block table. No model, sampling or I/O state (the runtime keeps that).
#pragma once

#include <cstdint>
#include <vector>

namespace hz {

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;     // prompt followed by generated tokens
  int32_t num_prompt_tokens = 0;
  int64_t num_computed = 0;        // tokens whose K/V are in the cache (a prefix of `tokens`)
  std::vector<int32_t> block_table;
  std::vector<uint64_t> block_hashes;  // prefix-cache keys of the leading finalized blocks
  int32_t num_cached_tokens = 0;       // prompt tokens attached from the prefix cache (first admission)
  int32_t num_preemptions = 0;

  // Tokens still to be run through the model before the next token can be sampled.
  int64_t num_pending() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

}  // namespace hz
