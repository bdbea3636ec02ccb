#include "kv/block_pool.h"

#include <algorithm>

#include "base/check.h"

namespace hz {

BlockPool::BlockPool(int32_t num_blocks)
    : ref_counts_(num_blocks, 0), cacheable_(num_blocks, 0), lru_pos_(num_blocks) {
  HZ_CHECK(num_blocks >= 0);
  free_.reserve(num_blocks);
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_.push_back(-i);
  std::make_heap(free_.begin(), free_.end());
}

std::optional<int32_t> BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    std::pop_heap(free_.begin(), free_.end());
    b = -free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    if (policy_ != nullptr) {
      auto v = policy_->coldest_where([this](uint64_t k) { return is_cached(static_cast<int32_t>(k)); });
      if (v) b = static_cast<int32_t>(*v);
      policy_->erase(static_cast<uint64_t>(b));
    }
    lru_.erase(lru_pos_[b]);
    cacheable_[b] = 0;
    ++num_evictions_;
    if (on_evict_) on_evict_(b);
  } else {
    return std::nullopt;
  }
  HZ_DCHECK(ref_counts_[b] == 0);
  ref_counts_[b] = 1;
  return b;
}

bool BlockPool::allocate_n(int32_t n, std::vector<BlockRef>* out) {
  if (n > num_allocatable()) return false;
  for (int32_t i = 0; i < n; ++i) out->push_back(BlockRef::pool(*allocate()));
  return true;
}

bool BlockPool::allocate_n(int32_t n, std::vector<int32_t>* out) {
  if (n > num_allocatable()) return false;
  for (int32_t i = 0; i < n; ++i) out->push_back(*allocate());
  return true;
}

void BlockPool::ref(int32_t block_idx) {
  HZ_CHECK(block_idx >= 0 && block_idx < num_blocks());
  HZ_CHECK(ref_counts_[block_idx] > 0);
  ++ref_counts_[block_idx];
}

void BlockPool::acquire(int32_t block_idx) {
  HZ_CHECK(block_idx >= 0 && block_idx < num_blocks());
  if (ref_counts_[block_idx] == 0) {
    HZ_CHECK_MSG(cacheable_[block_idx] != 0, "acquire of a free block");
    lru_.erase(lru_pos_[block_idx]);
  }
  ++ref_counts_[block_idx];
  if (policy_ != nullptr && cacheable_[block_idx] != 0) policy_->touch(static_cast<uint64_t>(block_idx));
}

void BlockPool::unref(int32_t block_idx) {
  HZ_CHECK(block_idx >= 0 && block_idx < num_blocks());
  HZ_CHECK(ref_counts_[block_idx] > 0);
  if (--ref_counts_[block_idx] > 0) return;
  if (on_unreferenced_) on_unreferenced_(block_idx);
  if (cacheable_[block_idx] != 0) {
    lru_pos_[block_idx] = lru_.insert(lru_.end(), block_idx);
    if (policy_ != nullptr) policy_->touch(static_cast<uint64_t>(block_idx));
  } else {
    free_.push_back(-block_idx);
    std::push_heap(free_.begin(), free_.end());
  }
}

void BlockPool::set_cacheable(int32_t block_idx) {
  HZ_CHECK(block_idx >= 0 && block_idx < num_blocks());
  HZ_CHECK(ref_counts_[block_idx] > 0);
  cacheable_[block_idx] = 1;
  if (policy_ != nullptr) policy_->touch(static_cast<uint64_t>(block_idx));
}

void BlockPool::uncache(int32_t block_idx) {
  HZ_CHECK(block_idx >= 0 && block_idx < num_blocks());
  HZ_CHECK(ref_counts_[block_idx] > 0);
  if (cacheable_[block_idx] == 0) return;
  cacheable_[block_idx] = 0;
  if (policy_ != nullptr) policy_->erase(static_cast<uint64_t>(block_idx));
}

void BlockPool::check_invariants() const {
  std::vector<int32_t> seen(ref_counts_.size(), 0);
  for (int32_t neg : free_) {
    int32_t b = -neg;
    HZ_CHECK(b >= 0 && b < num_blocks());
    HZ_CHECK_MSG(seen[b] == 0, "block twice in the free list");
    seen[b] = 1;
    HZ_CHECK_MSG(ref_counts_[b] == 0, "free block with references");
    HZ_CHECK_MSG(cacheable_[b] == 0, "cacheable block in the free list");
  }
  for (int32_t b : lru_) {
    HZ_CHECK(b >= 0 && b < num_blocks());
    HZ_CHECK_MSG(seen[b] == 0, "block in the free list and the cached list, or twice in the cached list");
    seen[b] = 2;
    HZ_CHECK_MSG(ref_counts_[b] == 0, "cached block with references");
    HZ_CHECK_MSG(cacheable_[b] != 0, "cached block not marked cacheable");
    HZ_CHECK_MSG(*lru_pos_[b] == b, "stale LRU position");
  }
  for (int32_t b = 0; b < num_blocks(); ++b) {
    HZ_CHECK(ref_counts_[b] >= 0);
    if (ref_counts_[b] == 0) HZ_CHECK_MSG(seen[b] != 0, "unreferenced block in neither the free nor the cached list");
  }
}

}  // namespace hz
