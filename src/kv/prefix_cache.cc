#include "kv/prefix_cache.h"

#include <xxhash.h>

#include <cstring>
#include <random>

#include "base/check.h"

namespace hz {

PrefixCache::PrefixCache(BlockPool& pool, int32_t block_tokens, std::string_view model_identity,
                         std::optional<uint64_t> seed)
    : pool_(pool),
      block_tokens_(block_tokens),
      key_of_(pool.num_blocks(), 0),
      has_key_(pool.num_blocks(), 0),
      tokens_of_(static_cast<size_t>(pool.num_blocks()) * block_tokens, 0),
      parent_of_(pool.num_blocks(), 0) {
  HZ_CHECK(block_tokens > 0);
  if (seed) {
    seed_ = *seed;
  } else {
    std::random_device rd;
    seed_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  identity_ = XXH3_64bits_withSeed(model_identity.data(), model_identity.size(), seed_);
  pool_.set_on_evict([this](int32_t b) { on_evict(b); });
}

uint64_t PrefixCache::chain_hash(uint64_t parent, const int32_t* tokens) const {
  std::vector<uint8_t> buf(16 + sizeof(int32_t) * block_tokens_);
  std::memcpy(buf.data(), &parent, 8);
  std::memcpy(buf.data() + 8, &identity_, 8);
  std::memcpy(buf.data() + 16, tokens, sizeof(int32_t) * block_tokens_);
  uint64_t h = XXH3_64bits_withSeed(buf.data(), buf.size(), seed_);
  return h == 0 ? 1 : h;  // 0 is "no parent"
}

PrefixCache::Match PrefixCache::match(const int32_t* tokens, int32_t max_blocks) const {
  Match m;
  uint64_t parent = 0;
  for (int32_t j = 0; j < max_blocks; ++j) {
    const int32_t* t = tokens + static_cast<size_t>(j) * block_tokens_;
    const uint64_t h = chain_hash(parent, t);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const int32_t b = it->second;
    if (std::memcmp(&tokens_of_[static_cast<size_t>(b) * block_tokens_], t, sizeof(int32_t) * block_tokens_) != 0) break;
    m.blocks.push_back(b);
    m.hashes.push_back(h);
    parent = h;
  }
  return m;
}

int32_t PrefixCache::lookup(uint64_t hash, const int32_t* tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const int32_t b = it->second;
  if (std::memcmp(&tokens_of_[static_cast<size_t>(b) * block_tokens_], tokens, sizeof(int32_t) * block_tokens_) != 0) return -1;
  return b;
}

void PrefixCache::for_each(const DemoteFn& f) const {
  for (const auto& [h, b] : by_hash_) f(b, h, parent_of_[b], &tokens_of_[static_cast<size_t>(b) * block_tokens_]);
}

void PrefixCache::insert(uint64_t hash, int32_t block, const int32_t* tokens, uint64_t parent) {
  HZ_CHECK(block >= 0 && block < pool_.num_blocks());
  if (by_hash_.count(hash) != 0 || has_key_[block] != 0) return;
  by_hash_.emplace(hash, block);
  key_of_[block] = hash;
  has_key_[block] = 1;
  parent_of_[block] = parent;
  ++inserts_;
  std::memcpy(&tokens_of_[static_cast<size_t>(block) * block_tokens_], tokens, sizeof(int32_t) * block_tokens_);
  pool_.set_cacheable(block);
}

void PrefixCache::forget(int32_t block) {
  if (has_key_[block] == 0) return;
  on_evict(block);
  pool_.uncache(block);
}

void PrefixCache::on_evict(int32_t block) {
  if (has_key_[block] == 0) return;
  if (on_demote_) on_demote_(block, key_of_[block], parent_of_[block], &tokens_of_[static_cast<size_t>(block) * block_tokens_]);
  by_hash_.erase(key_of_[block]);
  has_key_[block] = 0;
  ++evictions_;
}

}  // namespace hz
