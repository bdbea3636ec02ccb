// KvSeq: what the KV manager knows of a sequence — its tokens (they key the prefix cache), how many
// have K/V in the cache, and its block table. The scheduler's Sequence extends it.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_ref.h"

namespace hz {

struct KvSeq {
  std::vector<int32_t> tokens;         // prompt followed by generated tokens
  int64_t num_computed = 0;            // tokens whose K/V are in the cache (a prefix of `tokens`)
  // Position p lives in block_table[p / block_tokens] (a pool block or a far slot).
  std::vector<BlockRef> block_table;
  std::vector<uint64_t> block_hashes;  // prefix-cache keys of the leading finalized blocks
  int32_t num_cached_tokens = 0;       // prompt tokens attached from the prefix cache (first admission)
  int32_t num_preemptions = 0;
  bool reuse_prefix = true;            // false: never attaches cached blocks (computes every position)
};

}  // namespace hz
