#include "kv/disk_tier.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "base/check.h"

namespace hz {

DiskTier::DiskTier(KvCache& kv, PrefixCache& cache, kvstore::KvStore& store, std::optional<KvType> disk_type)
    : kv_(kv), cache_(cache), store_(store),
      disk_type_(disk_type ? KvTypePair{*disk_type, *disk_type} : kv.arena_types()) {
  transcode_ = disk_type_ != kv.arena_types();
  HZ_CHECK(store.options().block_bytes == kv.block_bytes_for(disk_type_));
  if (transcode_) scratch_.resize(store.options().block_bytes);
  HZ_CHECK(store.options().block_tokens == static_cast<uint32_t>(kv.config().block_tokens));
  cache_.set_on_demote([this](int32_t b, uint64_t h, uint64_t parent, const int32_t* t) { demote(b, h, parent, t); });
}

DiskTier::~DiskTier() { cache_.set_on_demote(nullptr); }

void DiskTier::demote(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens) {
  // Only fully encoded blocks: a block still staged is not what a later reader would compute.
  if (store_.contains(hash)) {  // written behind already: leaving RAM costs nothing
    ++stats_.demotions;
    return;
  }
  if (kv_.has_staging(block) || store_.degraded()) return;
  if (write(block, hash, parent, tokens).ok()) ++stats_.demotions;  // errors are counted and warned about by the store
}

Status DiskTier::write(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens) {
  const uint8_t* raw = kv_.block_data(block);
  if (transcode_) {
    kv_.transcode_out(block, disk_type_, scratch_.data());
    raw = scratch_.data();
  }
  return store_.put(hash, parent, kv_type_pair_code(disk_type_), tokens, raw);
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
      const kvstore::IndexEntry* e = store_.find(h);
      if (e == nullptr || e->kv_type != kv_type_pair_code(disk_type_)) break;
      auto b = pool.allocate();
      if (!b) break;
      Status s = store_.get(h, t, transcode_ ? scratch_.data() : kv_.block_data_mut(*b));
      if (s.ok() && transcode_) kv_.transcode_in(*b, disk_type_, scratch_.data());
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
  struct Item {
    int32_t block;
    uint64_t hash, parent;
    const int32_t* tokens;
    int32_t depth;
  };
  std::vector<Item> items;
  std::unordered_map<uint64_t, size_t> pos;
  cache_.for_each([&](int32_t b, uint64_t h, uint64_t parent, const int32_t* t) {
    if (kv_.has_staging(b) || store_.contains(h)) return;
    pos[h] = items.size();
    items.push_back({b, h, parent, t, -1});
  });
  // Parents before children: if the budget or the disk runs out part way, what is on disk is
  // still usable prefixes (a chain is only reusable up to its first missing block).
  std::vector<size_t> path;
  for (size_t i = 0; i < items.size(); ++i) {
    // Walk up to an item of known depth or a chain start, then number the path downwards.
    path.clear();
    size_t k = i;
    while (items[k].depth < 0 && path.size() <= items.size()) {  // the bound guards a hash cycle
      path.push_back(k);
      auto it = pos.find(items[k].parent);
      if (it == pos.end()) break;
      k = it->second;
    }
    int32_t d = items[k].depth >= 0 ? items[k].depth + 1 : 0;
    for (auto p = path.rbegin(); p != path.rend(); ++p) items[*p].depth = d++;
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.depth < b.depth; });
  for (const Item& it : items) {
    if (store_.degraded()) break;
    (void)write(it.block, it.hash, it.parent, it.tokens);
  }
  stats_.persisted += store_.stats().writes - before;
  (void)store_.sync();
}

}  // namespace hz
