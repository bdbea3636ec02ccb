#include "kv/kv_manager.h"

#include <algorithm>
#include <optional>

#include "base/check.h"
#include "base/log.h"
#include "kernels/cuda/launch_checks.h"

namespace hz {

KvManager::KvManager(BlockPool& pool, int32_t block_tokens, KvStorage* storage)
    : pool_(pool), block_tokens_(block_tokens), storage_(storage) {
  HZ_CHECK(block_tokens > 0);
}

KvManager::KvManager(std::unique_ptr<KvCache> cache, int32_t block_tokens)
    : cache_(std::move(cache)), pool_(cache_->pool()), block_tokens_(block_tokens), storage_(cache_.get()) {}

KvManager::KvManager(std::unique_ptr<DeviceKvArena> arena, int32_t block_tokens)
    : device_arena_(std::move(arena)), pool_(device_arena_->pool()), block_tokens_(block_tokens), storage_(device_arena_.get()) {}

KvManager::~KvManager() = default;

Status KvManager::check_device_options(const KvOptions& o, const KvPlan& plan) {
  if (o.hot_window > 0) return unimplemented("--kv-hot-window: the GPU KV cache keeps one type for every position (run on the CPU for a hot window)");
  if (!o.disk_dir.empty()) return unimplemented("--kv-disk-dir: the GPU KV cache has no disk tier yet (run on the CPU for it)");
  if (!o.remote_url.empty()) return unimplemented("--kv-remote: the GPU KV cache has no remote tier yet (run on the CPU for it)");
  const KvTypePair t = plan.precision.arena_types();
  for (int32_t st = 0; st < 2; ++st) {
    const KvType k = t[st];
    if (!cuda::kv_codec_supported(k)) {
      const char* flag = o.hot_type_v ? (st == 0 ? "--kv-cache-dtype-k" : "--kv-cache-dtype-v") : "--kv-cache-dtype";
      return unimplemented("{} {}: the GPU KV cache holds f16, bf16, f32, fp8, int8 or int4 (the per-channel types run "
                           "on the CPU)",
                           flag, kv_type_name(k));
    }
  }
  if (!t.same()) return unimplemented("--kv-cache-dtype-k / -v: the GPU KV cache keeps keys and values in one type");
  return Status();
}

Result<std::unique_ptr<KvManager>> KvManager::open_device(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m,
                                                          cuda::Backend& backend) {
  HZ_RETURN_IF_ERROR(check_device_options(o, plan));
  DeviceKvArenaConfig dc;
  dc.num_layers = m.num_layers;
  dc.num_kv_heads = m.num_kv_heads;
  dc.head_dim = m.head_dim;
  dc.block_tokens = plan.block_tokens;
  dc.num_blocks = plan.num_blocks;
  HZ_RETURN_IF_ERROR(DeviceKvArena::apply_precision(plan.precision, &dc));
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceKvArena> arena, DeviceKvArena::create(dc, backend));
  HZ_CHECK(arena->block_bytes() == plan.block_bytes);
  std::unique_ptr<KvManager> k(new KvManager(std::move(arena), plan.block_tokens));
  for (const std::string& w : plan.warnings) HZ_LOG_WARN("{}", w);
  if (plan.prefix_caching) {
    k->owned_prefix_ = std::make_unique<PrefixCache>(k->pool_, k->block_tokens_, m.identity, std::nullopt);
    k->set_prefix_cache(k->owned_prefix_.get(), 0);
  }
  return k;
}

Result<std::unique_ptr<KvManager>> KvManager::open(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m) {
  KvCacheConfig kc;
  kc.num_layers = m.num_layers;
  kc.num_kv_heads = m.num_kv_heads;
  kc.head_dim = m.head_dim;
  kc.block_tokens = plan.block_tokens;
  kc.precision = plan.precision;
  kc.num_blocks = plan.num_blocks;
  std::unique_ptr<KvManager> k(new KvManager(std::make_unique<KvCache>(kc), plan.block_tokens));
  if (plan.retained_blocks > 0) k->cache_->set_hot_retention(plan.retained_blocks);
  HZ_CHECK(k->cache_->block_bytes() == plan.block_bytes);
  HZ_LOG_DEBUG("{}", k->cache_->memory().summary());
  for (const std::string& w : plan.warnings) HZ_LOG_WARN("{}", w);
  if (plan.prefix_store) HZ_RETURN_IF_ERROR(k->open_store(o, plan, m));
  if (plan.far_tier) k->open_far(o);
  if (plan.prefix_caching) HZ_RETURN_IF_ERROR(k->open_prefix_cache(o, plan, m));
  if (plan.remote_tier) {
    HZ_ASSIGN_OR_RETURN(k->remote_tier_, RemoteTier::open(o, plan, m.fingerprint_inputs, *k->cache_, *k->owned_prefix_));
  }
  return k;
}

Status KvManager::open_store(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m) {
  kvstore::FingerprintInputs fi = m.fingerprint_inputs ? m.fingerprint_inputs() : kvstore::FingerprintInputs{};
  fi.kv_type = kv_precision_name(plan.precision);
  const KvTypePair disk_type = o.disk_type ? KvTypePair{*o.disk_type, *o.disk_type} : cache_->arena_types();
  fi.kv_type += " disk " + kv_type_pair_name(disk_type);
  fi.block_tokens = static_cast<uint32_t>(block_tokens_);
  fingerprint_ = kvstore::make_fingerprint(fi);

  kvstore::StoreOptions so;
  so.dir = o.disk_dir;
  so.budget_bytes = o.disk_budget_bytes;
  so.fingerprint = fingerprint_;
  so.block_tokens = static_cast<uint32_t>(block_tokens_);
  so.block_bytes = cache_->block_bytes_for(disk_type);
  auto codec = kvstore::codec_from_name(o.disk_codec);
  if (!codec) return invalid_argument("--kv-disk-codec '{}' is not one of zstd, lz4, none", o.disk_codec);
  so.codec = *codec;
  so.level = o.disk_level;
  so.policy = o.disk_policy;
  auto store = kvstore::KvStore::open(so);
  if (!store.ok()) {
    // A bad flag is the user's to fix; an unusable folder only costs the disk tier.
    if (store.status().code() != StatusCode::kIoError) return store.status();
    HZ_LOG_WARN("KV disk tier off: {}", store.status().message());
    return Status();
  }
  store_ = std::move(*store);
  const kvstore::StoreStats st = store_->stats();
  HZ_LOG_INFO("KV disk tier {}: {} blocks of {} reusable (fingerprint {}{}{})", so.dir, st.blocks, st.slots_total,
              fingerprint_.hex(), fi.weights.full ? ", full weights hash" : ", sampled weights digest",
              st.fingerprint_reset ? "; cleared a store of another model" : "");
  return Status();
}

void KvManager::open_far(const KvOptions& o) {
  FarTierOptions fo;
  fo.dir = o.disk_dir;
  fo.budget_bytes = o.disk_budget_bytes;
  fo.num_layers = cache_->config().num_layers;
  fo.layer_bytes = cache_->layer_bytes();
  fo.segments = cache_->far_segments();
  auto far = FarTier::open(fo);
  if (!far.ok()) {
    HZ_LOG_WARN("KV far tier off: {}; a sequence's context is limited to the RAM pool", far.status().message());
    return;
  }
  far_ = std::move(*far);
  cache_->attach_far(far_.get());
}

Status KvManager::open_prefix_cache(const KvOptions& o, const KvPlan& plan, const KvModelInfo& m) {
  std::string identity = m.identity;
  std::optional<uint64_t> seed;
  if (store_) {
    // Keys must mean the same in the next process: the fingerprint names the content (not the
    // path, which may move), the store's secret seed keys the hash.
    identity = "kv-fingerprint " + fingerprint_.hex();
    seed = store_->hash_seed();
  }
  owned_prefix_ = std::make_unique<PrefixCache>(pool_, block_tokens_, identity, seed);
  if (store_ && o.disk_policy != "lru") {
    // The same policy picks the block to demote from RAM as the record to drop from disk.
    HZ_ASSIGN_OR_RETURN(ram_policy_, kvstore::make_policy(o.disk_policy, "--kv-disk-policy"));
    pool_.set_eviction_policy(ram_policy_.get());
  }
  // With a hot window, attaching sequences copy the blocks they read hot (retained staging copies).
  set_prefix_cache(owned_prefix_.get(), plan.precision.hot_window > 0 ? plan.hot_blocks : 0);
  if (store_) disk_tier_ = std::make_unique<DiskTier>(*cache_, *owned_prefix_, *store_, o.disk_type);
  return Status();
}

void KvManager::set_prefix_cache(PrefixCache* cache, int32_t hot_blocks) {
  HZ_CHECK(cache == nullptr || cache->block_tokens() == block_tokens_);
  HZ_CHECK(hot_blocks >= 0);
  prefix_ = cache;
  hot_blocks_ = hot_blocks;
}

int64_t KvManager::registered_blocks(int64_t num_positions) const {
  // With hot attach, full blocks are registered at once (their arena form is sealed, their hot
  // form staged); otherwise once final.
  if (hot_blocks_ > 0 || storage_ == nullptr) return num_positions / block_tokens_;
  return storage_->finalized_blocks(num_positions);
}

int32_t KvManager::sink_blocks() const {
  return storage_ == nullptr ? 0 : static_cast<int32_t>(storage_->sink_blocks());
}

bool KvManager::read_hot(int32_t j, int32_t k) const { return j >= k - hot_blocks_ || j < sink_blocks(); }

bool KvManager::hot_attachable(const PrefixCache::Match& m, int32_t k) const {
  for (int32_t j = 0; j < k; ++j) {
    if (!read_hot(j, k)) continue;
    if (storage_ == nullptr || !storage_->hot_form_available(m.blocks[j])) return false;
  }
  return true;
}

int32_t KvManager::attachable_blocks(const PrefixCache::Match& m) const {
  int32_t k = static_cast<int32_t>(m.blocks.size());
  if (hot_blocks_ == 0 && sink_blocks() == 0) return k;
  // Longest k whose last hot_blocks_ blocks have their hot form (k = 0 always qualifies).
  while (k > 0 && !hot_attachable(m, k)) --k;
  return k;
}

int32_t KvManager::admission_blocks(const KvSeq& s, const PrefixCache::Match& m, int32_t k, int32_t first_chunk) const {
  const int64_t start = static_cast<int64_t>(k) * block_tokens_;
  const int64_t first = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()) - start - s.num_computed, first_chunk);
  // Shared attached blocks that leave the cached list are no longer allocatable. Private copies
  // (blocks read hot) are allocations too; their sources may be cached blocks the copies would
  // otherwise be allocated over, which the acquire in attach_prefix prevents.
  int32_t num_private = 0, revived = 0, held_sources = 0;
  for (int32_t j = 0; j < k; ++j) {
    const bool cached = pool_.is_cached(m.blocks[j]);
    if (read_hot(j, k)) {
      ++num_private;
      held_sources += cached ? 1 : 0;
    } else {
      revived += cached ? 1 : 0;
    }
  }
  const int32_t need = static_cast<int32_t>((start + s.num_computed + first + block_tokens_ - 1) / block_tokens_) -
                       static_cast<int32_t>(k + s.block_table.size());
  return std::max(0, need) + num_private + revived + held_sources;
}

bool KvManager::admit(KvSeq& s, int32_t first_chunk) {
  PrefixCache::Match m;
  int32_t max_blocks = 0;
  const bool fresh = prefix_ != nullptr && s.reuse_prefix && s.block_table.empty() && s.num_computed == 0;
  if (fresh) {
    max_blocks = static_cast<int32_t>((static_cast<int64_t>(s.tokens.size()) - 1) / block_tokens_);
    if (disk_tier_) disk_tier_->promote_prefix(s.tokens.data(), max_blocks);
    if (remote_tier_) remote_tier_->promote_prefix(s.tokens.data(), max_blocks);
    m = prefix_->match(s.tokens.data(), max_blocks);
  }
  // The longest attachable prefix that leaves room for the first chunk: a prompt longer than the
  // pool (a far tier holds the rest) attaches what fits and recomputes or promotes the rest later.
  int32_t num_attach = attachable_blocks(m);
  while (num_attach > 0 && (admission_blocks(s, m, num_attach, first_chunk) > pool_.num_allocatable() ||
                            !hot_attachable(m, num_attach)))
    --num_attach;
  if (admission_blocks(s, m, num_attach, first_chunk) > pool_.num_allocatable()) return false;
  if (fresh && max_blocks >= 0) attach_prefix(s, m, num_attach, max_blocks);
  return true;
}

void KvManager::attach_prefix(KvSeq& s, const PrefixCache::Match& m, int32_t num_attach, int32_t max_blocks) {
  // Shared blocks are attached, and private copies made of the blocks read hot (the newest
  // hot_blocks_ and the sink blocks). Every source is held while the copies are allocated, so no
  // allocation can evict one of them; admission counted these allocations.
  for (int32_t j = 0; j < num_attach; ++j) pool_.acquire(m.blocks[j]);
  for (int32_t j = 0; j < num_attach; ++j) {
    if (!read_hot(j, num_attach)) {
      s.block_table.push_back(BlockRef::pool(m.blocks[j]));
      continue;
    }
    const std::optional<int32_t> dst = pool_.allocate();
    HZ_CHECK(dst.has_value());
    if (storage_ != nullptr) storage_->copy_block(m.blocks[j], *dst);
    s.block_table.push_back(BlockRef::pool(*dst));
  }
  for (int32_t j = 0; j < num_attach; ++j) {
    if (read_hot(j, num_attach)) pool_.unref(m.blocks[j]);
  }
  s.block_hashes.assign(m.hashes.begin(), m.hashes.begin() + num_attach);
  s.num_computed = static_cast<int64_t>(num_attach) * block_tokens_;
  if (s.num_preemptions == 0) s.num_cached_tokens = static_cast<int32_t>(s.num_computed);
  prefix_->record(static_cast<uint64_t>(max_blocks), static_cast<uint64_t>(num_attach));
}

bool KvManager::needs_copy(const KvSeq& s) const {
  const int64_t idx = s.num_computed / block_tokens_;
  if (idx >= static_cast<int64_t>(s.block_table.size())) return false;
  HZ_DCHECK(s.block_table[idx].is_pool());  // the block written next is never far
  const int32_t b = s.block_table[idx].idx;
  return !(pool_.ref_count(b) == 1 && !pool_.cacheable(b));
}

bool KvManager::make_writable(KvSeq& s) {
  if (!needs_copy(s)) return true;
  const int64_t idx = s.num_computed / block_tokens_;
  const int32_t b = s.block_table[idx].idx;
  auto fresh = pool_.allocate();
  if (!fresh) return false;
  if (storage_ != nullptr) storage_->copy_block(b, *fresh);
  s.block_table[idx] = BlockRef::pool(*fresh);
  pool_.unref(b);
  if (static_cast<int64_t>(s.block_hashes.size()) > idx) s.block_hashes.resize(idx);  // the copy is not registered
  return true;
}

int32_t KvManager::blocks_needed(const KvSeq& s, int64_t num_tokens) const {
  const int32_t need = static_cast<int32_t>((num_tokens + block_tokens_ - 1) / block_tokens_);
  return std::max(0, need - static_cast<int32_t>(s.block_table.size()));
}

bool KvManager::allocate(KvSeq& s, int64_t num_tokens) {
  const int32_t need = blocks_needed(s, num_tokens);
  return need == 0 || pool_.allocate_n(need, &s.block_table);
}

int32_t KvManager::spill(KvSeq& s, int32_t n, bool* tier_full) {
  if (!can_spill()) return 0;
  const int64_t fin = std::min<int64_t>(storage_->finalized_blocks(s.num_computed), static_cast<int64_t>(s.block_table.size()));
  int32_t moved = 0;
  for (int64_t j = storage_->sink_blocks(); j < fin && moved < n; ++j) {  // sink blocks stay (read hot)
    if (s.block_table[j].is_far()) continue;
    const int32_t b = s.block_table[j].idx;
    if (pool_.ref_count(b) != 1) continue;  // shared
    const std::optional<int32_t> slot = storage_->spill(b);
    if (!slot) {
      *tier_full = true;
      break;
    }
    // A registered block leaves the prefix cache (to the disk store, when there is one).
    if (prefix_ != nullptr) prefix_->forget(b);
    pool_.unref(b);
    s.block_table[j] = BlockRef::far(*slot);
    ++moved;
  }
  return moved;
}

void KvManager::register_finished(KvSeq& s) {
  if (prefix_ == nullptr) return;
  const int64_t n = std::min<int64_t>(registered_blocks(s.num_computed), static_cast<int64_t>(s.block_table.size()));
  for (int64_t j = static_cast<int64_t>(s.block_hashes.size()); j < n; ++j) {
    const int32_t* t = s.tokens.data() + j * block_tokens_;
    const uint64_t parent = j == 0 ? 0 : s.block_hashes[j - 1];
    const uint64_t h = prefix_->chain_hash(parent, t);
    s.block_hashes.push_back(h);
    if (s.block_table[j].is_pool()) prefix_->insert(h, s.block_table[j].idx, t, parent);
  }
}

void KvManager::truncate(KvSeq& s) {
  const auto keep = static_cast<size_t>((s.num_computed + block_tokens_ - 1) / block_tokens_);
  while (s.block_table.size() > keep) {
    const BlockRef b = s.block_table.back();
    HZ_CHECK(b.is_pool());  // blocks past the computed positions are fresh, never far
    pool_.unref(b.idx);
    s.block_table.pop_back();
  }
  HZ_CHECK(s.block_hashes.size() <= keep);
  if (s.num_computed % block_tokens_ != 0 && storage_ != nullptr) {
    const BlockRef b = s.block_table.back();
    // Speculative steps commit (finalize) only the positions before their draft, so the block
    // holding the next position still has its exact rows.
    HZ_CHECK_MSG(b.is_pool() && storage_->reopen_block(b.idx), "rollback of a finalized KV block");
  }
}

void KvManager::free(KvSeq& s) {
  if (remote_tier_) remote_tier_->offer(s);  // write-behind of its finished blocks
  for (BlockRef b : s.block_table) {
    if (b.is_far()) {
      storage_->release_far_slot(b.idx);
    } else {
      pool_.unref(b.idx);
    }
  }
  s.block_table.clear();
  s.block_hashes.clear();
  s.num_computed = 0;
}

}  // namespace hz
