// Scheduler: continuous batching in tokens, not phases. Each step, every running sequence asks for
// its pending tokens (one for a decoding sequence, a chunk of the prompt for a prefilling one)
// within a per-step token budget; waiting sequences join between steps when there is room; when
// the KV pool runs dry the newest running sequence is preempted (its blocks freed, recomputed
// later). Bookkeeping only: owns no model, testable with a bare BlockPool.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "kv/block_pool.h"
#include "kv/prefix_cache.h"
#include "sched/sequence.h"

namespace hz {

struct SchedulerConfig {
  int32_t max_num_seqs = 8;             // sequences in one step
  int32_t max_num_batched_tokens = 512; // tokens in one step
  int32_t prefill_chunk = 512;          // prompt tokens of one sequence in one step
  int32_t block_tokens = 16;
};

struct ScheduledSlice {
  Sequence* seq = nullptr;
  int32_t num_tokens = 0;  // tokens [seq->num_computed, + num_tokens) run this step
  bool samples() const { return seq->num_computed + num_tokens == static_cast<int64_t>(seq->tokens.size()); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, BlockPool& pool);

  // Prefix caching: admitted sequences attach the cached blocks of their prompt's longest cached
  // prefix (never the block of the last prompt token, which must run to be sampled) and blocks are
  // registered once finalized — `finalized_blocks(n)` says how many leading blocks of a sequence
  // with n computed positions are final (KvCache::finalized_blocks).
  void set_prefix_cache(PrefixCache* cache, std::function<int64_t(int64_t)> finalized_blocks);
  // With a hot window, a sequence that attaches k cached blocks reads the last `hot_blocks` of them
  // hot (its first query, at k * block_tokens, has them in its window), and a cached block's hot
  // form exists only while `hot_form_available(block)`. Such sequences attach the longest matched
  // prefix whose last hot_blocks blocks have their hot form, share the blocks before those (read
  // cold only, from the arena), and get private copies of those hot_blocks (copy_block), so no
  // shared block ever has to stay hot for another sequence; the rest of the match is recomputed.
  void set_hot_attach(int32_t hot_blocks, std::function<bool(int32_t)> hot_form_available);
  // Copy-on-write: copies a block's contents (the KV cache's copy_block). Without it only the
  // bookkeeping is copied (tests with a bare pool).
  void set_copy_block(std::function<void(int32_t, int32_t)> copy) { copy_block_ = std::move(copy); }
  // Lower tiers: before a fresh sequence's prompt is matched against the prefix cache, `promote`
  // (tokens, max_blocks) may bring more of its chain into the cache (kv/disk_tier.h).
  void set_promoter(std::function<void(const int32_t*, int32_t)> promote) { promote_ = std::move(promote); }
  // Far tier (kv/far_tier.h): when the pool cannot give a step or an admission its blocks (after
  // evicting cached ones), finalized blocks of running sequences move out of RAM instead of a
  // sequence being preempted — the growing sequence's own oldest blocks first, then the others'.
  // `spill(block)` moves one exclusively held block and returns its far id (>= the pool's size),
  // dropping the pool reference, or -1 (cannot: the far tier is full or failed); `release_far`
  // drops a far id; `final_blocks(n)` is KvCache::finalized_blocks.
  void set_far_tier(std::function<int32_t(int32_t)> spill, std::function<void(int32_t)> release_far,
                    std::function<int64_t(int64_t)> final_blocks);
  // A sequence whose step must be redone from scratch (its far KV failed a checksum): its blocks
  // are freed and it goes back to the front of the waiting queue, to be recomputed.
  void restart(Sequence* seq);
  uint64_t num_spills() const { return num_spills_; }

  void add(std::unique_ptr<Sequence> seq);  // joins the waiting queue (FCFS)
  // Removes a sequence wherever it is and frees its blocks; returns it (null if unknown).
  std::unique_ptr<Sequence> remove(uint64_t id);

  // Plans one step: admits waiting sequences, allocates the blocks the step needs (preempting when
  // the pool runs dry). The slices stay valid until the next call.
  std::vector<ScheduledSlice> schedule();
  // After the model ran: marks the scheduled tokens computed.
  void commit(const std::vector<ScheduledSlice>& slices);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }

 private:
  int32_t blocks_needed(const Sequence& s, int64_t num_tokens) const;
  // Blocks for positions [0, num_tokens), and a private copy of the block the next write lands in
  // when it is shared (copy-on-write).
  bool grow(Sequence& s, int64_t num_tokens);
  bool make_writable(Sequence& s);
  // How many leading blocks of a match a sequence can attach (see set_hot_attach).
  int32_t attachable_blocks(const PrefixCache::Match& m) const;
  // Whether the last hot_blocks_ of the first k matched blocks have their hot form.
  bool hot_attachable(const PrefixCache::Match& m, int32_t k) const;
  void attach_prefix(Sequence& s, const PrefixCache::Match& m, int32_t num_attach, int32_t max_blocks);
  void register_blocks(Sequence& s);
  void release_blocks(Sequence& s);
  void preempt_last();
  // Moves up to `n` blocks of running sequences (`first` first) to the far tier; returns how many.
  int32_t spill_for(Sequence* first, int32_t n);
  int32_t spill_from(Sequence& s, int32_t n, bool* tier_full);

  SchedulerConfig cfg_;
  BlockPool& pool_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  std::deque<std::unique_ptr<Sequence>> waiting_;
  uint64_t num_preemptions_ = 0;
  PrefixCache* cache_ = nullptr;
  std::function<int64_t(int64_t)> finalized_blocks_;
  std::function<void(int32_t, int32_t)> copy_block_;
  std::function<void(const int32_t*, int32_t)> promote_;
  int32_t hot_blocks_ = 0;
  std::function<bool(int32_t)> hot_form_available_;
  std::function<int32_t(int32_t)> spill_;
  std::function<void(int32_t)> release_far_;
  std::function<int64_t(int64_t)> far_final_;
  uint64_t num_spills_ = 0;
};

}  // namespace hz
