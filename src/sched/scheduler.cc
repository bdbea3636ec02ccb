#include "sched/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace hz {

Scheduler::Scheduler(const SchedulerConfig& cfg, KvManager& kv) : cfg_(cfg), kv_(kv) {
  HZ_CHECK(cfg.max_num_seqs > 0 && cfg.max_num_batched_tokens > 0 && cfg.prefill_chunk > 0 && cfg.block_tokens > 0);
  HZ_CHECK(cfg.block_tokens == kv.block_tokens());
}

int32_t Scheduler::spill_for(Sequence* first, int32_t n) {
  if (!kv_.can_spill() || n <= 0) return 0;
  bool full = false;
  int32_t moved = first != nullptr ? kv_.spill(*first, n, &full) : 0;
  for (size_t i = 0; i < running_.size() && moved < n && !full; ++i) {
    if (running_[i].get() != first) moved += kv_.spill(*running_[i], n - moved, &full);
  }
  num_spills_ += static_cast<uint64_t>(moved);
  return moved;
}

void Scheduler::restart(Sequence* seq) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() != seq) continue;
    std::unique_ptr<Sequence> s = std::move(*it);
    running_.erase(it);
    kv_.free(*s);
    s->draft.clear();
    ++s->num_preemptions;
    ++num_preemptions_;
    waiting_.push_front(std::move(s));
    return;
  }
}

void Scheduler::add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

std::unique_ptr<Sequence> Scheduler::remove(uint64_t id) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if ((*it)->id == id) {
      std::unique_ptr<Sequence> s = std::move(*it);
      running_.erase(it);
      kv_.free(*s);
      return s;
    }
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      std::unique_ptr<Sequence> s = std::move(*it);
      waiting_.erase(it);
      kv_.free(*s);
      return s;
    }
  }
  return nullptr;
}

bool Scheduler::grow(Sequence& s, int64_t num_tokens) {
  // The private copy of a shared block first (its own spill when nothing is allocatable), then
  // the new blocks: the order of allocations, hence the block ids, is the KV manager's contract.
  if (kv_.needs_copy(s) && kv_.num_allocatable() == 0) spill_for(&s, 1);
  if (!kv_.make_writable(s)) return false;
  const int32_t need = kv_.blocks_needed(s, num_tokens);
  if (need == 0) return true;
  if (need > kv_.num_allocatable()) spill_for(&s, need - kv_.num_allocatable());
  return kv_.allocate(s, num_tokens);
}

void Scheduler::preempt_last() {
  std::unique_ptr<Sequence> s = std::move(running_.back());
  running_.pop_back();
  s->draft.clear();
  kv_.free(*s);  // recompute: its tokens (prompt + output so far) are prefilled again later
  ++s->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(std::move(s));
}

void Scheduler::admit_waiting() {
  // Admit waiting sequences while there is room for their first chunk. Admission never moves
  // running sequences' blocks to the far tier: a burst of requests waits for RAM rather than
  // pushing the running ones to disk.
  while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_num_seqs) {
    if (!kv_.admit(*waiting_.front(), cfg_.prefill_chunk)) break;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

std::vector<ScheduledSlice> Scheduler::schedule() {
  admit_waiting();
  std::vector<ScheduledSlice> slices;
  int32_t budget = cfg_.max_num_batched_tokens;
  // Draft tokens only use budget that every decoding sequence's own token leaves over.
  int32_t num_decoding = 0;
  for (const auto& s : running_) {
    if (s->num_pending() == 1) ++num_decoding;
  }
  int32_t spare = std::max(0, budget - num_decoding);
  // Decoding sequences first (one token each, plus their draft) so streams keep flowing, then
  // prompt chunks.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence& s = *running_[i];
      const bool decoding = s.num_pending() == 1;
      if (!decoding) s.draft.clear();  // only a decoding sequence's next token has a draft
      if (decoding != (pass == 0) || s.num_pending() <= 0) continue;
      const int32_t chunk = s.max_chunk > 0 ? std::min(s.max_chunk, cfg_.prefill_chunk) : cfg_.prefill_chunk;
      int32_t n = static_cast<int32_t>(std::min<int64_t>({s.num_pending(), chunk, budget}));
      if (decoding && !s.draft.empty()) {
        int32_t d = std::min({static_cast<int32_t>(s.draft.size()), spare, budget - 1});
        // The draft is optional: it takes only blocks the pool has (never a spill or a preemption).
        const int32_t copy = kv_.needs_copy(s) ? 1 : 0;
        while (d > 0 && kv_.blocks_needed(s, s.num_computed + 1 + d) + copy > kv_.num_allocatable()) --d;
        s.draft.resize(std::max(0, d));
        if (d > 0 && !grow(s, s.num_computed + 1 + d)) s.draft.clear();
        n += static_cast<int32_t>(s.draft.size());
        spare -= static_cast<int32_t>(s.draft.size());
      }
      // Make room: preempt the newest sequences (never this one) until its blocks fit.
      while (!grow(s, s.num_computed + n)) {
        if (running_.back().get() == &s) {
          n = 0;
          break;
        }
        // A preempted sequence may already be in `slices`: drop it from there.
        Sequence* victim = running_.back().get();
        slices.erase(std::remove_if(slices.begin(), slices.end(), [&](const ScheduledSlice& x) { return x.seq == victim; }),
                     slices.end());
        preempt_last();
      }
      if (n == 0) {
        s.draft.clear();
        break;
      }
      slices.push_back({&s, n, static_cast<int32_t>(s.draft.size())});
      budget -= n;
    }
    // Prompt chunks share a step that decodes only up to the cap.
    if (pass == 0 && !slices.empty() && cfg_.prefill_with_decode > 0) budget = std::min(budget, cfg_.prefill_with_decode);
  }
  // A lone sequence that cannot grow even with the pool to itself is preempted by the caller's
  // admission check (prompt + output beyond the pool is refused at submit time).
  return slices;
}

void Scheduler::commit(const std::vector<ScheduledSlice>& slices) {
  for (const auto& s : slices) {
    s.seq->num_computed += s.num_tokens;
    HZ_CHECK(s.seq->num_computed <= static_cast<int64_t>(s.seq->tokens.size()));
    if (s.num_draft > 0) {
      s.seq->draft.clear();
      kv_.truncate(*s.seq);
    }
    kv_.register_finished(*s.seq);
  }
}

}  // namespace hz
