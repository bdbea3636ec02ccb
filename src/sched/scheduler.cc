#include "sched/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace hz {

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockPool& pool) : cfg_(cfg), pool_(pool) {
  HZ_CHECK(cfg.max_num_seqs > 0 && cfg.max_num_batched_tokens > 0 && cfg.prefill_chunk > 0 && cfg.block_tokens > 0);
}

void Scheduler::add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

std::unique_ptr<Sequence> Scheduler::remove(uint64_t id) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if ((*it)->id == id) {
      std::unique_ptr<Sequence> s = std::move(*it);
      running_.erase(it);
      release_blocks(*s);
      return s;
    }
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      std::unique_ptr<Sequence> s = std::move(*it);
      waiting_.erase(it);
      release_blocks(*s);
      return s;
    }
  }
  return nullptr;
}

int32_t Scheduler::blocks_needed(const Sequence& s, int64_t num_tokens) const {
  int32_t need = static_cast<int32_t>((num_tokens + cfg_.block_tokens - 1) / cfg_.block_tokens);
  return std::max(0, need - static_cast<int32_t>(s.block_table.size()));
}

bool Scheduler::grow(Sequence& s, int64_t num_tokens) {
  int32_t need = blocks_needed(s, num_tokens);
  if (need == 0) return true;
  return pool_.allocate_n(need, &s.block_table);
}

void Scheduler::release_blocks(Sequence& s) {
  for (int32_t b : s.block_table) pool_.unref(b);
  s.block_table.clear();
  s.num_computed = 0;
}

void Scheduler::preempt_last() {
  std::unique_ptr<Sequence> s = std::move(running_.back());
  running_.pop_back();
  release_blocks(*s);  // recompute: its tokens (prompt + output so far) are prefilled again later
  ++s->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(std::move(s));
}

std::vector<ScheduledSlice> Scheduler::schedule() {
  // Admit waiting sequences while there is room for their first chunk.
  while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_num_seqs) {
    Sequence& s = *waiting_.front();
    int64_t first = std::min<int64_t>(s.num_pending(), cfg_.prefill_chunk);
    if (blocks_needed(s, s.num_computed + first) > pool_.num_free()) break;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }

  std::vector<ScheduledSlice> slices;
  int32_t budget = cfg_.max_num_batched_tokens;
  // Decoding sequences first (one token each) so streams keep flowing, then prompt chunks.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence& s = *running_[i];
      const bool decoding = s.num_pending() == 1;
      if (decoding != (pass == 0) || s.num_pending() <= 0) continue;
      int32_t n = static_cast<int32_t>(std::min<int64_t>({s.num_pending(), cfg_.prefill_chunk, budget}));
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
      if (n == 0) break;
      slices.push_back({&s, n});
      budget -= n;
    }
  }
  // A lone sequence that cannot grow even with the pool to itself is preempted by the caller's
  // admission check (prompt + output beyond the pool is refused at submit time).
  return slices;
}

void Scheduler::commit(const std::vector<ScheduledSlice>& slices) {
  for (const auto& s : slices) s.seq->num_computed += s.num_tokens;
}

}  // namespace hz
