// BlockPool: bookkeeping of KV blocks — ids, reference counts, the free list and the LRU list of
// cached blocks (unreferenced blocks kept for prefix reuse). Knows nothing of what a block stores.
// Single-threaded: owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <vector>

#include "kv/block_ref.h"
#include "kvstore/hotness_policy.h"

namespace hz {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  // Blocks in the free list (never cached, or evicted).
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  // Unreferenced blocks kept for prefix reuse; allocate() evicts them (LRU) when nothing is free.
  int32_t num_cached() const { return static_cast<int32_t>(lru_.size()); }
  int32_t num_allocatable() const { return num_free() + num_cached(); }
  int32_t num_used() const { return num_blocks() - num_allocatable(); }  // referenced

  // A block with reference count 1: the lowest free id, else the least recently used cached block
  // (evicted: on_evict runs first), or nullopt when neither is left. Lowest-id-first means a
  // sequence that allocates several blocks in a row tends to get a contiguous run.
  std::optional<int32_t> allocate();
  // `n` blocks or none at all.
  bool allocate_n(int32_t n, std::vector<int32_t>* out);
  bool allocate_n(int32_t n, std::vector<BlockRef>* out);  // appended as pool block refs
  // One more reference to a referenced block.
  void ref(int32_t block_idx);
  // One more reference to a referenced or cached block (a cached block leaves the LRU list).
  void acquire(int32_t block_idx);
  // Drops one reference; at zero the block goes to the LRU list when cacheable, else to the free list.
  void unref(int32_t block_idx);
  int32_t ref_count(int32_t block_idx) const { return ref_counts_[block_idx]; }

  // Marks a referenced block as cacheable: it is kept (cached) when its last reference goes, until
  // evicted. Eviction clears the mark.
  void set_cacheable(int32_t block_idx);
  bool cacheable(int32_t block_idx) const { return cacheable_[block_idx] != 0; }
  // Clears a referenced block's cacheable mark (its contents are moving elsewhere: the prefix
  // cache must forget it first, PrefixCache::forget).
  void uncache(int32_t block_idx);
  bool is_cached(int32_t block_idx) const { return ref_counts_[block_idx] == 0 && cacheable_[block_idx] != 0; }

  // Called when a cached block is evicted for reuse (the prefix cache drops its key).
  void set_on_evict(std::function<void(int32_t)> f) { on_evict_ = std::move(f); }
  // Called when a block's reference count drops to zero (the KV cache drops its staging copy).
  void set_on_unreferenced(std::function<void(int32_t)> f) { on_unreferenced_ = std::move(f); }
  uint64_t num_evictions() const { return num_evictions_; }
  // Which cached block allocate() evicts: by default the least recently released (the LRU list);
  // with a policy, its coldest cached block. The policy sees every cacheable block: registration,
  // each hit (acquire) and each release count as accesses. Not owned; set before any allocation.
  void set_eviction_policy(kvstore::HotnessPolicy* policy) { policy_ = policy; }

  // Aborts when the bookkeeping is inconsistent: every block is exactly one of free (count 0, not
  // cacheable, in the free list once), cached (count 0, cacheable, in the LRU list once) or
  // referenced (count > 0, in neither list). Tests call it.
  void check_invariants() const;

 private:
  std::vector<int32_t> ref_counts_;
  std::vector<uint8_t> cacheable_;
  // Free ids kept as a max-heap of negated ids (i.e. a min-heap), so allocate() returns the lowest.
  std::vector<int32_t> free_;
  std::list<int32_t> lru_;  // cached blocks, least recently released first
  std::vector<std::list<int32_t>::iterator> lru_pos_;
  std::function<void(int32_t)> on_evict_;
  std::function<void(int32_t)> on_unreferenced_;
  uint64_t num_evictions_ = 0;
  kvstore::HotnessPolicy* policy_ = nullptr;
};

}  // namespace hz
