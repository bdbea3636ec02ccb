// KvManager: the KV cache as one module. It owns (or, for tests, borrows) the block pool, the
// storage (the arena with its staging copies and hot retention), the prefix cache and the tiers
// (disk prefix store, far tier), and answers the scheduler's questions about a sequence's blocks:
// admit it (attaching its cached prefix), make room for n more tokens, spill old blocks to the far
// tier, register finished blocks, free them. The scheduler decides whom to preempt or spill; this
// class says whether an allocation fits. Engine thread only; no callbacks into the scheduler.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "kv/block_pool.h"
#include "kv/device_kv_arena.h"
#include "kv/disk_tier.h"
#include "kv/far_tier.h"
#include "kv/kv_cache.h"
#include "kv/kv_options.h"
#include "kv/kv_seq.h"
#include "kv/kv_storage.h"
#include "kv/prefix_cache.h"
#include "kv/remote_tier.h"
#include "kvstore/fingerprint.h"
#include "kvstore/hotness_policy.h"
#include "kvstore/kv_store.h"

namespace hz {

// What the KV cache needs of the model: its KV shape and what the cached contents depend on.
struct KvModelInfo {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  // Everything the K/V depend on (model, shape, KV types, block size): keys the prefix cache.
  std::string identity;
  // The disk store's fingerprint inputs (model, tokenizer, RoPE, kernels); called only when a
  // prefix store opens. The KV type and block size are filled in by the manager.
  std::function<kvstore::FingerprintInputs()> fingerprint_inputs;
};

class KvManager {
 public:
  // Bookkeeping over parts owned elsewhere: `pool`'s blocks hold `block_tokens` positions;
  // `storage` (may be null: contents are not tracked, as for a bare pool) must outlive this.
  KvManager(BlockPool& pool, int32_t block_tokens, KvStorage* storage = nullptr);
  // The engine's: the arena, prefix cache and tiers that `plan` (KvOptions::validate) asks for.
  static Result<std::unique_ptr<KvManager>> open(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m);
  // The same over a device arena on `backend` (kv/device_kv_arena.h): the pool, block tables and
  // prefix cache on the host, the blocks in device memory. The features the device arena lacks
  // (8- and 4-bit types, hot window, disk and remote tiers) are refused with an error naming the flag.
  static Result<std::unique_ptr<KvManager>> open_device(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m,
                                                        cuda::Backend& backend);
  // The checks of open_device alone: what a device KV cache cannot do, each naming its flag.
  static Status check_device_options(const KvOptions& o, const KvPlan& plan);
  ~KvManager();
  KvManager(const KvManager&) = delete;
  KvManager& operator=(const KvManager&) = delete;

  // Prefix caching over `cache` (not owned): admitted sequences attach their prompt's longest cached
  // prefix, finished blocks are registered. With a hot window (hot_blocks > 0) a sequence that
  // attaches k blocks reads the last hot_blocks of them hot: it attaches only as far as those have
  // their hot form, shares the blocks before them and gets private copies of them, so no shared
  // block ever has to stay hot; full blocks are registered at once (their hot form is retained).
  // Sink blocks (KvStorage::sink_blocks) are read hot too: private copies, like the newest ones.
  void set_prefix_cache(PrefixCache* cache, int32_t hot_blocks = 0);

  // --- What the scheduler calls.
  int32_t block_tokens() const { return block_tokens_; }
  int32_t num_allocatable() const { return pool_.num_allocatable(); }
  // Admission of a waiting sequence whose first step runs up to `first_chunk` tokens: attaches the
  // longest cached prefix (brought from disk first, when there is a store) that leaves room for
  // that step. False (nothing changed) when even the step alone does not fit. Never spills.
  bool admit(KvSeq& s, int32_t first_chunk);
  // Whether the block the next write lands in is shared, so the write needs a private copy.
  bool needs_copy(const KvSeq& s) const;
  // Gives `s` a private copy of that block (copy-on-write); false when no block is allocatable.
  bool make_writable(KvSeq& s);
  // Blocks `s` still lacks to hold positions [0, num_tokens).
  int32_t blocks_needed(const KvSeq& s, int64_t num_tokens) const;
  // Allocates those blocks, all or none.
  bool allocate(KvSeq& s, int64_t num_tokens);
  // Moves up to `n` of `s`'s finalized, exclusively held blocks (oldest first) to the far tier;
  // returns how many. Sets *tier_full when the far tier refused one.
  int32_t spill(KvSeq& s, int32_t n, bool* tier_full);
  // Whether spill() can move anything (the storage says whether its far tier has room).
  bool can_spill() const { return storage_ != nullptr; }
  // Registers `s`'s newly finished blocks in the prefix cache (no-op without one).
  void register_finished(KvSeq& s);
  // Rolls `s` back to its num_computed positions after a step wrote past them (rejected
  // speculative tokens): blocks holding only later positions go back to the pool, and the block
  // the next write lands in is reopened (its rows from num_computed on are rewritten). The state
  // is then what plain decoding would have left. Those positions were never registered or spilled.
  void truncate(KvSeq& s);
  // Drops every block reference of `s` (pool and far tier) and resets its KV state.
  void free(KvSeq& s);

  // --- The engine's view.
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  KvCache* cache() { return cache_.get(); }  // null for a borrowed-parts or device manager
  DeviceKvArena* device_arena() { return device_arena_.get(); }  // null unless open_device
  PrefixCache* prefix_cache() { return prefix_; }
  FarTier* far() { return far_.get(); }
  DiskTier* disk_tier() { return disk_tier_.get(); }
  RemoteTier* remote_tier() { return remote_tier_.get(); }
  kvstore::KvStore* store() { return store_.get(); }
  const kvstore::Fingerprint& fingerprint() const { return fingerprint_; }

 private:
  KvManager(std::unique_ptr<KvCache> cache, int32_t block_tokens);
  KvManager(std::unique_ptr<DeviceKvArena> arena, int32_t block_tokens);
  Status open_store(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m);
  void open_far(const KvOptions& o);
  Status open_prefix_cache(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m);
  int64_t registered_blocks(int64_t num_positions) const;
  // How many leading blocks of a match a sequence can attach (see set_prefix_cache).
  int32_t attachable_blocks(const PrefixCache::Match& m) const;
  bool hot_attachable(const PrefixCache::Match& m, int32_t k) const;
  // Sink blocks of the storage (KvStorage::sink_blocks), and whether a sequence attaching `k`
  // matched blocks reads block `j` hot (the newest hot_blocks_ or a sink block): a private copy.
  int32_t sink_blocks() const;
  bool read_hot(int32_t j, int32_t k) const;
  // Blocks an admission takes out of the allocatable ones when `k` matched blocks are attached.
  int32_t admission_blocks(const KvSeq& s, const PrefixCache::Match& m, int32_t k, int32_t first_chunk) const;
  void attach_prefix(KvSeq& s, const PrefixCache::Match& m, int32_t num_attach, int32_t max_blocks);

  // Owned parts (the engine's manager), declared before the references into them.
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<DeviceKvArena> device_arena_;
  std::unique_ptr<kvstore::KvStore> store_;
  std::unique_ptr<FarTier> far_;
  std::unique_ptr<PrefixCache> owned_prefix_;
  std::unique_ptr<kvstore::HotnessPolicy> ram_policy_;  // RAM eviction order unless LRU
  std::unique_ptr<DiskTier> disk_tier_;
  std::unique_ptr<RemoteTier> remote_tier_;  // Redis shared by replicas (--kv-remote)
  kvstore::Fingerprint fingerprint_;

  BlockPool& pool_;
  int32_t block_tokens_;
  KvStorage* storage_ = nullptr;
  PrefixCache* prefix_ = nullptr;
  int32_t hot_blocks_ = 0;
};

}  // namespace hz
