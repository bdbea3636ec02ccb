// KvMemory: what the KV cache holds, by tier — the block arena (the planner's figure) and the
// staging copies of blocks still read exactly or hot — for the planner, metrics and reports.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_layout.h"

namespace hz {

struct KvMemoryTier {
  KvType type = KvType::kF16;    // keys (MLA: the latent)
  KvType type_v = KvType::kF16;  // values
  uint64_t bytes_per_block = 0;  // all layers, K and V
  int64_t blocks_total = 0;      // reserved (arena) or created (staging)
  int64_t blocks_in_use = 0;     // referenced (arena) or holding a block's copy (staging)
  int64_t blocks_cached = 0;     // arena only: unreferenced, kept for prefix reuse
  uint64_t bytes_reserved() const { return bytes_per_block * static_cast<uint64_t>(blocks_total); }
  uint64_t bytes_in_use() const { return bytes_per_block * static_cast<uint64_t>(blocks_in_use); }
};

struct KvMemory {
  int32_t block_tokens = 0;
  KvPrecision precision;
  KvMemoryTier arena;    // every block, in the arena type (cold type with a hot window)
  KvMemoryTier staging;  // f16 / f32 copies of blocks still read exactly or hot (high-water slots)
  uint64_t bytes_reserved() const { return arena.bytes_reserved() + staging.bytes_reserved(); }
  // Arena bytes per token (exact: block bytes / block tokens).
  double arena_bytes_per_token() const {
    return block_tokens > 0 ? static_cast<double>(arena.bytes_per_block) / block_tokens : 0;
  }
  std::string summary() const;  // one line for logs and reports
};

}  // namespace hz
