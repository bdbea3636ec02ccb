#include "kv/remote_tier.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/log.h"

namespace hz {

namespace {
constexpr size_t kMaxSent = size_t{1} << 20;  // ~1M keys (tens of MB of bookkeeping at most)
}  // namespace

Result<std::unique_ptr<RemoteTier>> RemoteTier::open(const KvOptions& o, const KvPlan& plan,
                                                      const std::function<kvstore::FingerprintInputs()>& inputs,
                                                      KvCache& kv, PrefixCache& cache) {
  kvstore::FingerprintInputs fi = inputs ? inputs() : kvstore::FingerprintInputs{};
  // Replicas exchange arena bytes: the same model is not enough, the bytes' type, layout and the
  // backend that computed them must match too (CPU and GPU kernels differ in the last bits).
  fi.kv_type = fmt::format("{} remote {} backend {}", kv_precision_name(plan.precision), kv_type_pair_name(kv.arena_types()),
                           o.backend);
  fi.block_tokens = static_cast<uint32_t>(plan.block_tokens);
  kvstore::RemoteOptions ro;
  ro.url = o.remote_url;
  ro.secret = o.remote_secret;
  ro.fingerprint = kvstore::make_fingerprint(fi);
  ro.block_tokens = static_cast<uint32_t>(plan.block_tokens);
  ro.block_bytes = kv.block_bytes();
  ro.kv_type = kv_type_pair_code(kv.arena_types());
  ro.timeout_ms = o.remote_timeout_ms;
  ro.queue_bytes = o.remote_queue_bytes;
  ro.ttl_s = o.remote_ttl_s;
  ro.codec = kvstore::codec_from_name(o.remote_codec).value_or(kvstore::Codec::kNone);  // validated
  HZ_ASSIGN_OR_RETURN(auto store, kvstore::RedisStore::open(ro));
  HZ_LOG_INFO("KV remote tier {} (fingerprint {}){}", store->address().display(), ro.fingerprint.hex(),
              store->degraded() ? ": not reachable now, retrying in the background" : "");
  return std::make_unique<RemoteTier>(kv, cache, std::move(store), std::chrono::milliseconds(o.remote_deadline_ms));
}

RemoteTier::RemoteTier(KvCache& kv, PrefixCache& cache, std::unique_ptr<kvstore::RedisStore> store,
                       std::chrono::milliseconds deadline)
    : kv_(kv), cache_(cache), store_(std::move(store)), deadline_(deadline) {}

void RemoteTier::sync_epoch() {
  const uint64_t e = store_->stats().epoch;
  if (e != epoch_ || sent_.size() > kMaxSent) sent_.clear();
  epoch_ = e;
}

int32_t RemoteTier::promote_prefix(const int32_t* tokens, int32_t max_blocks) {
  if (max_blocks <= 0) return 0;
  const auto deadline = std::chrono::steady_clock::now() + deadline_;
  BlockPool& pool = kv_.pool();
  const int32_t bt = kv_.config().block_tokens;
  std::vector<int32_t> held;  // chain blocks referenced while we allocate, so none is evicted
  uint64_t parent = 0;
  kvstore::ChainKey rparent{};
  int32_t j = 0;
  int32_t promoted = 0;
  for (; j < max_blocks; ++j) {  // the RAM hits
    const int32_t* t = tokens + static_cast<size_t>(j) * bt;
    const uint64_t h = cache_.chain_hash(parent, t);
    const int32_t in_ram = cache_.lookup(h, t);
    if (in_ram < 0) break;
    pool.acquire(in_ram);
    held.push_back(in_ram);
    parent = h;
  }
  // The rest of the chain, in chunks: keys (the prefix cache's and the store's) are computed only
  // as far as Redis has the chain, since a chain usually ends at its first miss.
  constexpr int32_t kChunk = 64;
  const uint64_t bytes = kv_.block_bytes();
  bool more = j < max_blocks && !store_->degraded();
  // The store's keys chain over every block: those of the RAM hits first (only when needed).
  for (int32_t k = 0; more && k < j; ++k) rparent = store_->chain_key(rparent, tokens + static_cast<size_t>(k) * bt);
  for (int32_t first = j; more && first < max_blocks; first += kChunk) {
    const int32_t n = std::min(kChunk, max_blocks - first);
    std::vector<kvstore::ChainKey> keys;
    std::vector<uint64_t> hashes, parents;
    for (int32_t k = first; k < first + n; ++k) {
      const int32_t* t = tokens + static_cast<size_t>(k) * bt;
      parents.push_back(parent);
      parent = cache_.chain_hash(parent, t);
      hashes.push_back(parent);
      rparent = store_->chain_key(rparent, t);
      keys.push_back(rparent);
    }
    auto tokens_of = [&](int32_t i) { return tokens + static_cast<size_t>(first + i) * bt; };
    auto accept = [&](int32_t i, const uint8_t* payload) {
      const int32_t* t = tokens_of(i);
      if (const int32_t in_ram = cache_.lookup(hashes[i], t); in_ram >= 0) {  // computed meanwhile
        pool.acquire(in_ram);
        held.push_back(in_ram);
        return true;
      }
      const std::optional<int32_t> b = pool.allocate();
      if (!b) return false;
      std::memcpy(kv_.block_data_mut(*b), payload, bytes);
      cache_.insert(hashes[i], *b, t, parents[i]);
      held.push_back(*b);
      sent_.insert(kvstore::chain_key_u64(keys[i]));
      ++promoted;
      return true;
    };
    more = store_->fetch(keys, tokens_of, accept, deadline) == n;
  }
  for (int32_t b : held) pool.unref(b);  // back to the cached list, in chain order
  stats_.promotions += static_cast<uint64_t>(promoted);
  return promoted;
}

void RemoteTier::offer(const KvSeq& s) {
  if (s.block_hashes.empty()) return;
  sync_epoch();
  const int32_t bt = kv_.config().block_tokens;
  kvstore::ChainKey rparent{};
  const size_t n = std::min(s.block_hashes.size(), s.block_table.size());
  for (size_t j = 0; j < n; ++j) {
    const int32_t* t = s.tokens.data() + j * bt;
    const kvstore::ChainKey key = store_->chain_key(rparent, t);
    const BlockRef b = s.block_table[j];
    const uint64_t id = kvstore::chain_key_u64(key);
    // Only fully encoded RAM blocks: a far block is not at hand, a staged one not final.
    if (b.is_pool() && !kv_.has_staging(b.idx) && !sent_.count(id)) {
      if (!store_->enqueue(key, rparent, t, kv_.block_data(b.idx))) break;  // degraded or full: counted there
      sent_.insert(id);
      ++stats_.offered;
    }
    rparent = key;
  }
}

}  // namespace hz
