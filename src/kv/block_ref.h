// BlockRef: a typed reference to one KV block — which tier holds it and its index there. Block
// tables are vectors of BlockRef, so a far block can never be mistaken for a pool block.
#pragma once

#include <cstdint>
#include <ostream>

namespace hz {

// Where a block's bytes live. kPool: the RAM pool's arena (BlockPool index); kFar: a slot of the
// far tier (kv/far_tier.h). A device arena or a remote tier would be further values.
enum class KvTier : uint8_t { kPool, kFar };

struct BlockRef {
  KvTier tier = KvTier::kPool;
  int32_t idx = 0;  // pool block index or far slot, by `tier`

  static constexpr BlockRef pool(int32_t block_idx) { return {KvTier::kPool, block_idx}; }
  static constexpr BlockRef far(int32_t slot) { return {KvTier::kFar, slot}; }
  bool is_pool() const { return tier == KvTier::kPool; }
  bool is_far() const { return tier == KvTier::kFar; }
  friend bool operator==(const BlockRef&, const BlockRef&) = default;
};

// "p3" (pool block 3) or "f0" (far slot 0): readable test failures and logs.
inline std::ostream& operator<<(std::ostream& os, const BlockRef& r) {
  return os << (r.is_far() ? 'f' : 'p') << r.idx;
}

}  // namespace hz
