// PrefixCache: finds KV blocks already computed for a prompt prefix. Full blocks are keyed by a
// hash chain — h_j = H(h_{j-1}, model identity, the block's token ids) — with XXH3 under a random
// per-process seed, so keys cannot be predicted or forged from outside; a hit is also checked
// against the block's stored token ids. Registered blocks are marked cacheable in the BlockPool,
// which keeps them after their last reference and evicts them LRU (this class then forgets them,
// after handing them to the on_demote hook: the disk tier, kv/disk_tier.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace hz {

class PrefixCache {
 public:
  // `model_identity` names everything the KV contents depend on (model, KV types, block size).
  // `seed` keys the hash: random per process by default; a persistent disk tier passes its store's
  // (secret, random per store) seed so keys stay valid across restarts.
  PrefixCache(BlockPool& pool, int32_t block_tokens, std::string_view model_identity,
              std::optional<uint64_t> seed = std::nullopt);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int32_t block_tokens() const { return block_tokens_; }
  // Key of a full block of `block_tokens` ids whose predecessor's key is `parent` (0 for block 0).
  uint64_t chain_hash(uint64_t parent, const int32_t* tokens) const;

  struct Match {
    std::vector<int32_t> blocks;   // cached blocks of the longest matching prefix, in order
    std::vector<uint64_t> hashes;  // their keys
  };
  // The longest run of cached blocks matching tokens' first `max_blocks` full blocks. Acquires
  // nothing and counts nothing (the caller decides whether to attach, then calls record()).
  Match match(const int32_t* tokens, int32_t max_blocks) const;
  void record(uint64_t queries, uint64_t hits) {
    queries_ += queries;
    hits_ += hits;
  }
  // Registers a referenced, fully written block under `hash` (no-op when the key is already held by
  // another block: that one stays the cached copy).
  // `parent` is the key of the block before it (0 for a first block), kept for the disk tier.
  void insert(uint64_t hash, int32_t block, const int32_t* tokens, uint64_t parent = 0);
  bool contains(int32_t block) const { return has_key_[block] != 0; }
  // Forgets a registered block that is leaving RAM while referenced (a running sequence's block
  // moving to the far tier): hands it to on_demote like an eviction, then drops its key and its
  // cacheable mark. No-op for an unregistered block.
  void forget(int32_t block);
  // The block registered under `hash` whose token ids equal `tokens`, or -1.
  int32_t lookup(uint64_t hash, const int32_t* tokens) const;
  // Called with (block, key, parent key, token ids) when a cached block is evicted, before it is
  // forgotten and reused: its arena bytes are still intact.
  using DemoteFn = std::function<void(int32_t, uint64_t, uint64_t, const int32_t*)>;
  void set_on_demote(DemoteFn f) { on_demote_ = std::move(f); }
  // Every registered block (referenced or cached), for persisting at shutdown.
  void for_each(const DemoteFn& f) const;
  size_t size() const { return by_hash_.size(); }

  uint64_t queries() const { return queries_; }  // prompt blocks looked up
  uint64_t hits() const { return hits_; }        // of which attached from the cache
  uint64_t evictions() const { return evictions_; }
  uint64_t inserts() const { return inserts_; }  // blocks registered so far

 private:
  void on_evict(int32_t block);

  BlockPool& pool_;
  int32_t block_tokens_;
  uint64_t seed_;
  uint64_t identity_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::vector<uint64_t> key_of_;     // per block
  std::vector<uint8_t> has_key_;     // per block
  std::vector<int32_t> tokens_of_;   // per block: its token ids, to confirm a hit
  std::vector<uint64_t> parent_of_;  // per block: its predecessor's key
  DemoteFn on_demote_;
  uint64_t queries_ = 0, hits_ = 0, evictions_ = 0, inserts_ = 0;
};

}  // namespace hz
