// RemoteTier: owns the remote store and connects the RAM prefix cache to a Redis shared by replicas (kvstore/redis_store.h).
// A finished sequence's full blocks are written behind (copied into the store's bounded queue; a
// background thread sends them), and at admission a prompt's chain past the RAM (and disk) hits is
// fetched under a deadline and the verified blocks are promoted into fresh arena blocks, registered
// in the prefix cache like blocks computed here. Blocks are named by the store's own keyed chain
// (not the prefix cache's per-process keys), so every replica with the same secret and fingerprint
// finds them. Engine thread only (the store's writer thread is internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_set>

#include "kv/kv_cache.h"
#include "kv/kv_options.h"
#include "kv/kv_seq.h"
#include "kv/prefix_cache.h"
#include "kvstore/fingerprint.h"
#include "kvstore/redis_store.h"

namespace hz {

struct RemoteTierStats {
  uint64_t promotions = 0;  // blocks fetched from Redis into RAM
  uint64_t offered = 0;     // blocks handed to the write-behind queue
};

class RemoteTier {
 public:
  // The engine's: a store for `o`'s URL under the fingerprint of `inputs` (the model) plus the KV
  // precision, arena type, block size and backend. Errors name the flag; Redis being down is not one.
  static Result<std::unique_ptr<RemoteTier>> open(const KvOptions& o, const KvPlan& plan,
                                                  const std::function<kvstore::FingerprintInputs()>& inputs,
                                                  KvCache& kv, PrefixCache& cache);
  // `kv` and `cache` must outlive it. `deadline`: the most one admission spends fetching.
  RemoteTier(KvCache& kv, PrefixCache& cache, std::unique_ptr<kvstore::RedisStore> store,
             std::chrono::milliseconds deadline);
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  // Brings the blocks of `tokens`' chain (its first `max_blocks` full blocks) that follow the RAM
  // hits from Redis into the prefix cache, while free or evictable blocks last and the deadline
  // allows. Returns the blocks promoted.
  int32_t promote_prefix(const int32_t* tokens, int32_t max_blocks);
  // Writes behind `s`'s registered blocks that are in RAM, fully encoded and not sent yet.
  void offer(const KvSeq& s);

  const RemoteTierStats& stats() const { return stats_; }
  kvstore::RedisStore& store() { return *store_; }

 private:
  void sync_epoch();

  KvCache& kv_;
  PrefixCache& cache_;
  std::unique_ptr<kvstore::RedisStore> store_;
  std::chrono::milliseconds deadline_;
  // Blocks known to be in Redis (written or fetched), by the low 64 bits of their chain key; cleared
  // when Redis came back from an outage (it may have lost them) and when it grows past a bound.
  std::unordered_set<uint64_t> sent_;
  uint64_t epoch_ = 0;
  RemoteTierStats stats_;
};

}  // namespace hz
