// DiskTier: connects the RAM prefix cache to the disk store (kvstore/kv_store.h). Cached blocks the
// RAM pool evicts are demoted (their arena bytes written to disk) instead of dropped; at admission a
// prompt's chain is looked up past the RAM hits and found blocks are promoted (decoded into fresh
// arena blocks and registered in the prefix cache); at shutdown every registered block is persisted
// so the next process starts with these prefixes as hits. Engine thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/prefix_cache.h"
#include "kvstore/kv_store.h"

namespace hz {

struct DiskTierStats {
  uint64_t demotions = 0;         // blocks evicted from RAM that are on disk (written then, or before)
  uint64_t promotions = 0;        // blocks read back into RAM
  uint64_t persisted = 0;         // blocks written behind (idle) or at shutdown: persist_all()
  uint64_t promote_failures = 0;  // disk records found but unusable (recomputed instead)
};

class DiskTier {
 public:
  // Registers itself as the prefix cache's demotion hook. All three must outlive it. Blocks are
  // stored in `disk_type` for both K and V (re-quantized on the way out and back; lossy when
  // narrower than the arena's types), by default in the arena's types, byte for byte.
  DiskTier(KvCache& kv, PrefixCache& cache, kvstore::KvStore& store, std::optional<KvType> disk_type = std::nullopt);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  KvTypePair disk_types() const { return disk_type_; }
  // Demotion hook: writes block `block` (key, parent key, token ids) unless it is on disk already.
  void demote(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens);
  // Brings blocks of `tokens`' chain (its first `max_blocks` full blocks) that are on disk but not
  // in RAM into the prefix cache, while free or evictable blocks last. Returns the blocks promoted.
  int32_t promote_prefix(const int32_t* tokens, int32_t max_blocks);
  // Writes every registered block not on disk yet and makes the store durable.
  void persist_all();

  const DiskTierStats& stats() const { return stats_; }
  kvstore::KvStore& store() { return store_; }

 private:
  Status write(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens);

  KvCache& kv_;
  PrefixCache& cache_;
  kvstore::KvStore& store_;
  KvTypePair disk_type_;
  bool transcode_ = false;        // disk_type_ differs from the arena types
  std::vector<uint8_t> scratch_;  // one block in disk_type_
  DiskTierStats stats_;
};

}  // namespace hz
