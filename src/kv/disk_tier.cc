#include "kv/disk_tier.h"

#include <vector>

#include "base/check.h"

namespace hz {

DiskTier::DiskTier(KvCache& kv, PrefixCache& cache, kvstore::KvStore& store) : kv_(kv), cache_(cache), store_(store) {
  HZ_CHECK(store.options().block_bytes == kv.block_bytes());
  HZ_CHECK(store.options().block_tokens == static_cast<uint32_t>(kv.config().block_tokens));
  cache_.set_on_demote([this](int32_t b, uint64_t h, uint64_t parent, const int32_t* t) { demote(b, h, parent, t); });
}

DiskTier::~DiskTier() { cache_.set_on_demote(nullptr); }

void DiskTier::demote(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens) {
  // Only fully encoded blocks: a block still staged is not what a later reader would compute.
  if (kv_.has_staging(block) || store_.contains(hash) || store_.degraded()) return;
  Status s = store_.put(hash, parent, static_cast<uint8_t>(kv_.arena_type()), tokens, kv_.block_data(block));
  if (s.ok()) ++stats_.demotions;  // errors are counted and warned about by the store
}

int32_t DiskTier::promote_prefix(const int32_t* tokens, int32_t max_blocks) {
  BlockPool& pool = kv_.pool();
  const int32_t bt = kv_.config().block_tokens;
  std::vector<int32_t> held;  // chain blocks referenced while we allocate, so none is evicted
  int32_t promoted = 0;
  uint64_t parent = 0;
  for (int32_t j = 0; j < max_blocks; ++j) {
    const int32_t* t = tokens + static_cast<size_t>(j) * bt;
    const uint64_t h = cache_.chain_hash(parent, t);
    const int32_t in_ram = cache_.lookup(h, t);
    if (in_ram >= 0) {
      pool.acquire(in_ram);
      held.push_back(in_ram);
    } else {
      if (!store_.contains(h)) break;
      auto b = pool.allocate();
      if (!b) break;
      Status s = store_.get(h, t, kv_.block_data_mut(*b));
      if (!s.ok()) {
        ++stats_.promote_failures;  // dropped by the store; the block is recomputed
        pool.unref(*b);
        break;
      }
      cache_.insert(h, *b, t, parent);
      held.push_back(*b);
      ++promoted;
    }
    parent = h;
  }
  for (int32_t b : held) pool.unref(b);  // back to the cached list, in chain order
  stats_.promotions += static_cast<uint64_t>(promoted);
  return promoted;
}

void DiskTier::persist_all() {
  uint64_t before = store_.stats().writes;
  cache_.for_each([this](int32_t b, uint64_t h, uint64_t parent, const int32_t* t) {
    if (kv_.has_staging(b) || store_.contains(h) || store_.degraded()) return;
    (void)store_.put(h, parent, static_cast<uint8_t>(kv_.arena_type()), t, kv_.block_data(b));
  });
  stats_.persisted += store_.stats().writes - before;
  (void)store_.sync();
}

}  // namespace hz
