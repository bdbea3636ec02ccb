#include "kv/block_pool.h"

#include <algorithm>

#include "base/check.h"

namespace hz {

BlockPool::BlockPool(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  HZ_CHECK(num_blocks >= 0);
  free_.reserve(num_blocks);
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_.push_back(-i);
  std::make_heap(free_.begin(), free_.end());
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  std::pop_heap(free_.begin(), free_.end());
  int32_t b = -free_.back();
  free_.pop_back();
  HZ_DCHECK(ref_counts_[b] == 0);
  ref_counts_[b] = 1;
  return b;
}

bool BlockPool::allocate_n(int32_t n, std::vector<int32_t>* out) {
  if (n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) out->push_back(*allocate());
  return true;
}

void BlockPool::ref(int32_t block_idx) {
  HZ_CHECK(block_idx >= 0 && block_idx < num_blocks());
  HZ_CHECK(ref_counts_[block_idx] > 0);
  ++ref_counts_[block_idx];
}

void BlockPool::unref(int32_t block_idx) {
  HZ_CHECK(block_idx >= 0 && block_idx < num_blocks());
  HZ_CHECK(ref_counts_[block_idx] > 0);
  if (--ref_counts_[block_idx] == 0) {
    free_.push_back(-block_idx);
    std::push_heap(free_.begin(), free_.end());
  }
}

void BlockPool::check_invariants() const {
  std::vector<int32_t> seen(ref_counts_.size(), 0);
  for (int32_t neg : free_) {
    int32_t b = -neg;
    HZ_CHECK(b >= 0 && b < num_blocks());
    HZ_CHECK_MSG(seen[b] == 0, "block twice in the free list");
    seen[b] = 1;
    HZ_CHECK_MSG(ref_counts_[b] == 0, "free block with references");
  }
  for (int32_t b = 0; b < num_blocks(); ++b) {
    HZ_CHECK(ref_counts_[b] >= 0);
    if (ref_counts_[b] == 0) HZ_CHECK_MSG(seen[b] == 1, "unreferenced block missing from the free list");
  }
}

}  // namespace hz
