// BlockPool: bookkeeping of KV blocks — ids, reference counts and the free list. Knows nothing of
// what a block stores. Single-threaded: owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace hz {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }

  // A free block with reference count 1, or nullopt when none is left. Prefers the lowest id, so a
  // sequence that allocates several blocks in a row tends to get a contiguous run.
  std::optional<int32_t> allocate();
  // `n` blocks or none at all.
  bool allocate_n(int32_t n, std::vector<int32_t>* out);
  void ref(int32_t block_idx);
  // Drops one reference; the block returns to the free list at zero.
  void unref(int32_t block_idx);
  int32_t ref_count(int32_t block_idx) const { return ref_counts_[block_idx]; }

  // Aborts when the bookkeeping is inconsistent: every block is free (count 0, in the free list
  // exactly once) or referenced (count > 0, not in the free list). Tests call it.
  void check_invariants() const;

 private:
  std::vector<int32_t> ref_counts_;
  // Free ids kept as a max-heap of negated ids (i.e. a min-heap), so allocate() returns the lowest.
  std::vector<int32_t> free_;
};

}  // namespace hz
