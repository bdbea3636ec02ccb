#include "sched/scheduler.h"

#include <algorithm>
#include <optional>

#include "base/check.h"

namespace hz {

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockPool& pool) : cfg_(cfg), pool_(pool) {
  HZ_CHECK(cfg.max_num_seqs > 0 && cfg.max_num_batched_tokens > 0 && cfg.prefill_chunk > 0 && cfg.block_tokens > 0);
}

void Scheduler::set_prefix_cache(PrefixCache* cache, std::function<int64_t(int64_t)> finalized_blocks) {
  HZ_CHECK(cache == nullptr || cache->block_tokens() == cfg_.block_tokens);
  cache_ = cache;
  finalized_blocks_ = std::move(finalized_blocks);
}

void Scheduler::set_hot_attach(int32_t hot_blocks, std::function<bool(int32_t)> hot_form_available) {
  HZ_CHECK(hot_blocks >= 0);
  hot_blocks_ = hot_blocks;
  hot_form_available_ = std::move(hot_form_available);
}

bool Scheduler::hot_attachable(const PrefixCache::Match& m, int32_t k) const {
  for (int32_t j = std::max(0, k - hot_blocks_); j < k; ++j) {
    if (!hot_form_available_(m.blocks[j])) return false;
  }
  return true;
}

int32_t Scheduler::attachable_blocks(const PrefixCache::Match& m) const {
  int32_t k = static_cast<int32_t>(m.blocks.size());
  if (hot_blocks_ == 0) return k;
  // Longest k whose last hot_blocks_ blocks have their hot form (k = 0 always qualifies).
  while (k > 0 && !hot_attachable(m, k)) --k;
  return k;
}

void Scheduler::set_far_tier(std::function<int32_t(int32_t)> spill, std::function<void(int32_t)> release_far,
                             std::function<int64_t(int64_t)> final_blocks) {
  spill_ = std::move(spill);
  release_far_ = std::move(release_far);
  far_final_ = std::move(final_blocks);
}

int32_t Scheduler::spill_from(Sequence& s, int32_t n, bool* tier_full) {
  const int64_t fin = std::min<int64_t>(far_final_(s.num_computed), static_cast<int64_t>(s.block_table.size()));
  int32_t moved = 0;
  for (int64_t j = 0; j < fin && moved < n; ++j) {
    const int32_t b = s.block_table[j];
    if (b >= pool_.num_blocks() || pool_.ref_count(b) != 1) continue;  // far already, or shared
    const int32_t f = spill_(b);
    if (f < 0) {
      *tier_full = true;
      break;
    }
    s.block_table[j] = f;
    ++moved;
  }
  return moved;
}

int32_t Scheduler::spill_for(Sequence* first, int32_t n) {
  if (!spill_ || n <= 0) return 0;
  bool full = false;
  int32_t moved = first != nullptr ? spill_from(*first, n, &full) : 0;
  for (size_t i = 0; i < running_.size() && moved < n && !full; ++i) {
    if (running_[i].get() != first) moved += spill_from(*running_[i], n - moved, &full);
  }
  num_spills_ += static_cast<uint64_t>(moved);
  return moved;
}

void Scheduler::restart(Sequence* seq) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() != seq) continue;
    std::unique_ptr<Sequence> s = std::move(*it);
    running_.erase(it);
    release_blocks(*s);
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

bool Scheduler::make_writable(Sequence& s) {
  const int64_t idx = s.num_computed / cfg_.block_tokens;
  if (idx >= static_cast<int64_t>(s.block_table.size())) return true;
  const int32_t b = s.block_table[idx];
  if (pool_.ref_count(b) == 1 && !pool_.cacheable(b)) return true;
  if (pool_.num_allocatable() == 0) spill_for(&s, 1);
  auto fresh = pool_.allocate();
  if (!fresh) return false;
  if (copy_block_) copy_block_(b, *fresh);
  s.block_table[idx] = *fresh;
  pool_.unref(b);
  if (static_cast<int64_t>(s.block_hashes.size()) > idx) s.block_hashes.resize(idx);  // the copy is not registered
  return true;
}

bool Scheduler::grow(Sequence& s, int64_t num_tokens) {
  if (!make_writable(s)) return false;
  int32_t need = blocks_needed(s, num_tokens);
  if (need == 0) return true;
  if (need > pool_.num_allocatable()) spill_for(&s, need - pool_.num_allocatable());
  return pool_.allocate_n(need, &s.block_table);
}

void Scheduler::release_blocks(Sequence& s) {
  for (int32_t b : s.block_table) {
    if (b >= pool_.num_blocks()) {
      release_far_(b);
    } else {
      pool_.unref(b);
    }
  }
  s.block_table.clear();
  s.block_hashes.clear();
  s.num_computed = 0;
}

void Scheduler::attach_prefix(Sequence& s, const PrefixCache::Match& m, int32_t num_attach, int32_t max_blocks) {
  const int32_t first_private = std::max(0, num_attach - hot_blocks_);
  for (int32_t j = 0; j < first_private; ++j) {
    pool_.acquire(m.blocks[j]);
    s.block_table.push_back(m.blocks[j]);
  }
  // Private copies of the blocks read hot. The sources are held while the copies are allocated,
  // so no allocation can evict one of them; admission counted these allocations.
  for (int32_t j = first_private; j < num_attach; ++j) pool_.acquire(m.blocks[j]);
  for (int32_t j = first_private; j < num_attach; ++j) {
    const std::optional<int32_t> dst = pool_.allocate();
    HZ_CHECK(dst.has_value());
    if (copy_block_) copy_block_(m.blocks[j], *dst);
    s.block_table.push_back(*dst);
  }
  for (int32_t j = first_private; j < num_attach; ++j) pool_.unref(m.blocks[j]);
  s.block_hashes.assign(m.hashes.begin(), m.hashes.begin() + num_attach);
  s.num_computed = static_cast<int64_t>(num_attach) * cfg_.block_tokens;
  if (s.num_preemptions == 0) s.num_cached_tokens = static_cast<int32_t>(s.num_computed);
  cache_->record(static_cast<uint64_t>(max_blocks), static_cast<uint64_t>(num_attach));
}

void Scheduler::register_blocks(Sequence& s) {
  const int64_t n = std::min<int64_t>(finalized_blocks_(s.num_computed), static_cast<int64_t>(s.block_table.size()));
  const int32_t bt = cfg_.block_tokens;
  for (int64_t j = static_cast<int64_t>(s.block_hashes.size()); j < n; ++j) {
    const int32_t* t = s.tokens.data() + j * bt;
    const uint64_t parent = j == 0 ? 0 : s.block_hashes[j - 1];
    const uint64_t h = cache_->chain_hash(parent, t);
    s.block_hashes.push_back(h);
    if (s.block_table[j] < pool_.num_blocks()) cache_->insert(h, s.block_table[j], t, parent);  // not a far block
  }
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
    PrefixCache::Match m;
    int32_t max_blocks = 0;
    if (cache_ != nullptr && s.block_table.empty() && s.num_computed == 0) {
      max_blocks = static_cast<int32_t>((static_cast<int64_t>(s.tokens.size()) - 1) / cfg_.block_tokens);
      if (promote_) promote_(s.tokens.data(), max_blocks);
      m = cache_->match(s.tokens.data(), max_blocks);
    }
    // Blocks the admission takes out of the allocatable ones when `k` matched blocks are attached.
    auto takes = [&](int32_t k) {
      const int32_t num_private = std::min(k, hot_blocks_);
      const int64_t start = static_cast<int64_t>(k) * cfg_.block_tokens;
      const int64_t first = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()) - start - s.num_computed, cfg_.prefill_chunk);
      int32_t revived = 0;  // shared attached blocks that leave the cached list, so no longer allocatable
      for (int32_t j = 0; j < k - num_private; ++j) revived += pool_.is_cached(m.blocks[j]) ? 1 : 0;
      const int32_t need = static_cast<int32_t>((start + s.num_computed + first + cfg_.block_tokens - 1) / cfg_.block_tokens) -
                           static_cast<int32_t>(k + s.block_table.size());
      // Private copies are allocations too; their sources may be cached blocks the copies would
      // otherwise be allocated over, which the acquire in attach_prefix prevents.
      int32_t held_sources = 0;
      for (int32_t j = k - num_private; j < k; ++j) held_sources += pool_.is_cached(m.blocks[j]) ? 1 : 0;
      return std::max(0, need) + num_private + revived + held_sources;
    };
    // The longest attachable prefix that leaves room for the first chunk: a prompt longer than the
    // pool (a far tier holds the rest) attaches what fits and recomputes or promotes the rest later.
    int32_t num_attach = attachable_blocks(m);
    while (num_attach > 0 && (takes(num_attach) > pool_.num_allocatable() || !hot_attachable(m, num_attach))) --num_attach;
    // Admission never moves running sequences' blocks to the far tier: a burst of requests waits
    // for RAM rather than pushing the running ones to disk.
    if (takes(num_attach) > pool_.num_allocatable()) break;
    if (cache_ != nullptr && max_blocks >= 0 && s.block_table.empty() && s.num_computed == 0) {
      attach_prefix(s, m, num_attach, max_blocks);
    }
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
  for (const auto& s : slices) {
    s.seq->num_computed += s.num_tokens;
    if (cache_ != nullptr) register_blocks(*s.seq);
  }
}

}  // namespace hz
