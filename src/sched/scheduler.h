// Scheduler: continuous batching in tokens, not phases. Each step, every running sequence asks for
// its pending tokens (one for a decoding sequence, a chunk of the prompt for a prefilling one)
// within a per-step token budget; waiting sequences join between steps when there is room; when
// the KV pool runs dry the newest running sequence is preempted (its blocks freed, recomputed
// later). Bookkeeping only: owns no model; the KV manager owns the blocks, and tests run it over a
// bare BlockPool.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "kv/kv_manager.h"
#include "sched/sequence.h"

namespace hz {

struct SchedulerConfig {
  int32_t max_num_seqs = 8;             // sequences in one step
  int32_t max_num_batched_tokens = 512; // tokens in one step
  int32_t prefill_chunk = 512;          // prompt tokens of one sequence in one step
  // Prompt tokens of all sequences in a step that also decodes (0: up to the budget). A step costs
  // about its token count, so this bounds the gap between two tokens of a stream while prompts
  // prefill; a step with nothing to decode still takes the whole budget.
  int32_t prefill_with_decode = 0;
  int32_t block_tokens = 16;
};

struct ScheduledSlice {
  Sequence* seq = nullptr;
  // Tokens [seq->num_computed, + num_tokens) run this step; the last num_draft of them are
  // seq->draft (a decoding sequence's speculative tokens), the others come from seq->tokens.
  int32_t num_tokens = 0;
  int32_t num_draft = 0;
  bool samples() const { return seq->num_computed + num_tokens - num_draft == static_cast<int64_t>(seq->tokens.size()); }
};

class Scheduler {
 public:
  // `kv` answers whether a sequence's blocks fit (kv/kv_manager.h); it must outlive the scheduler.
  Scheduler(const SchedulerConfig& cfg, KvManager& kv);

  // A sequence whose step must be redone from scratch (its far KV failed a checksum): its blocks
  // are freed and it goes back to the front of the waiting queue, to be recomputed.
  void restart(Sequence* seq);
  // Blocks moved to the far tier: when the pool cannot give a step its blocks (after evicting
  // cached ones), finalized blocks of running sequences move out of RAM instead of a sequence
  // being preempted — the growing sequence's own oldest blocks first, then the others'.
  uint64_t num_spills() const { return num_spills_; }

  void add(std::unique_ptr<Sequence> seq);  // joins the waiting queue (FCFS)
  // Removes a sequence wherever it is and frees its blocks; returns it (null if unknown).
  std::unique_ptr<Sequence> remove(uint64_t id);

  // Plans one step: admits waiting sequences, allocates the blocks the step needs (preempting when
  // the pool runs dry). The slices stay valid until the next call.
  std::vector<ScheduledSlice> schedule();
  // After the model ran: marks the scheduled tokens computed. A speculative slice's num_tokens is
  // by then what verification kept (the next token and the accepted draft tokens, already appended
  // to seq->tokens): the positions past them are rolled back (KvManager::truncate).
  void commit(const std::vector<ScheduledSlice>& slices);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }

 private:
  // Blocks for positions [0, num_tokens), and a private copy of the block the next write lands in
  // when it is shared (copy-on-write), spilling to the far tier when the pool is short.
  bool grow(Sequence& s, int64_t num_tokens);
  void preempt_last();
  // Moves up to `n` blocks of running sequences (`first` first) to the far tier; returns how many.
  int32_t spill_for(Sequence* first, int32_t n);
  void admit_waiting();

  SchedulerConfig cfg_;
  KvManager& kv_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  std::deque<std::unique_ptr<Sequence>> waiting_;
  uint64_t num_preemptions_ = 0;
  uint64_t num_spills_ = 0;
};

}  // namespace hz
