// KvStorage: what the KV manager asks of the memory that holds KV blocks (the CPU arena, KvCache;
// later a device arena). The manager keeps the metadata — ids, reference counts, prefix keys, block
// tables — and this interface answers for the contents, so the manager (and the scheduler over it)
// can be tested with a fake storage and no model.
#pragma once

#include <cstdint>
#include <optional>

namespace hz {

class KvStorage {
 public:
  virtual ~KvStorage() = default;
  // Blocks [0, n) of a sequence with `num_positions` computed positions that no later query reads
  // exactly or hot: their contents are final.
  virtual int64_t finalized_blocks(int64_t num_positions) const = 0;
  // Blocks [0, n) of every sequence that every later query reads hot (sink tokens): they are never
  // final whatever finalized_blocks says, keep their hot form while held, never move to the far
  // tier, and a sequence attaching them from the prefix cache gets private copies.
  virtual int64_t sink_blocks() const { return 0; }
  // Copy-on-write: block `src`'s contents into `dst`.
  virtual void copy_block(int32_t src, int32_t dst) = 0;
  // Whether `block`'s hot form (read by a query whose hot window covers it) is at hand.
  virtual bool hot_form_available(int32_t block) const = 0;
  // Moves finalized pool block `block`'s contents to the far tier and returns its far slot; the
  // pool reference stays the caller's to drop. nullopt when there is no far tier or it is full.
  virtual std::optional<int32_t> spill(int32_t block) = 0;
  // Frees far slot `slot`.
  virtual void release_far_slot(int32_t slot) = 0;
  // Pool block `block` is about to be written again from some slot on (positions written past a
  // sequence's end were rolled back): whatever was derived from its old rows (an encoded form) is
  // redone when it completes again. False when its rows can no longer be rewritten (finalized).
  virtual bool reopen_block(int32_t block) = 0;
};

}  // namespace hz
