#include "model/attention_runner.h"

#include <algorithm>
#include <cstring>

namespace hz {

namespace {
// Attention jobs below this many score multiply-adds run on the engine thread alone. Measured on 2
// cores, one sequence decoding a 2M-parameter model (4 heads of 64): serial was faster at depth
// 3000 (768K) and slower at 8000 (2M); a 260K-parameter model at depth 300 decoded 1.2x faster.
constexpr int64_t kSerialAttentionMacs = int64_t{1} << 20;

// Copies the scaled queries of kv head `kvh`'s group of token `tok` into `qs`.
void scaled_queries(const AttnJob& job, int64_t tok, int32_t kvh, int32_t hd, float* qs) {
  const int32_t group = job.num_heads / job.num_kv_heads;
  const float* q = job.q + (tok * job.num_heads + static_cast<int64_t>(kvh) * group) * hd;
  for (int64_t i = 0; i < static_cast<int64_t>(group) * hd; ++i) qs[i] = q[i] * job.q_scale;
}

}  // namespace

void AttentionRunner::run(const AttnJob& job, ThreadPool& pool) {
  const int32_t group = job.num_heads / job.num_kv_heads;
  if (scratch_.size() < static_cast<size_t>(pool.num_threads())) scratch_.resize(pool.num_threads());
  for (auto& s : scratch_) s.prepare(job.head_dim, group);
  const int64_t units = job.num_tokens * job.num_kv_heads;
  int64_t supers = 0, most = 0, keys = 0;
  for (int64_t t = 0; t < job.num_tokens; ++t) {
    const int64_t pos = job.rows[t].pos;
    const int64_t first = attn_first_key(pos, job.window);
    const int64_t n = pos / kSuperTokens - first / kSuperTokens + 1;
    supers += n * job.num_kv_heads;
    most = std::max(most, n);
    keys += pos + 1 - first;
  }
  // A job this small (multiply-adds of its scores) runs on the engine thread alone: handing it to
  // the workers costs more than it takes.
  const bool serial = keys * job.num_heads * job.head_dim < kSerialAttentionMacs;
  const int64_t threads = serial ? 1 : pool.num_threads();
  bool split = split_ == AttnSplit::kAlways;
  // Split when whole units cannot keep the threads busy: few of them (decode, short prefill), or
  // one much deeper than the rest (a batch mixing long and short sequences).
  if (split_ == AttnSplit::kAuto) {
    split = threads > 1 && supers > units && (units < 4 * threads || most * 2 * threads > supers);
  }
  last_split_ = split;
  if (!split) return run_unsplit(job, pool, serial);
  // About four tasks per thread; a forced split with one thread still takes the split path.
  const int64_t chunk = split_ == AttnSplit::kAlways ? 1 : std::max<int64_t>(1, supers / (4 * threads));
  run_split(job, pool, chunk);
}

void AttentionRunner::run_unsplit(const AttnJob& job, ThreadPool& pool, bool serial) {
  const int32_t hd = job.head_dim;
  const int32_t group = job.num_heads / job.num_kv_heads;
  blocks_.clear();
  if (job.window == 0) {
    // Prefill: runs of up to kQueryBlock consecutive queries of one sequence share each key tile
    // (attend_group_block), so the K/V rows come from memory once per run instead of per query.
    constexpr int64_t kQueryBlock = 16;
    for (int64_t t = 0; t < job.num_tokens;) {
      int64_t e = t + 1;
      while (e < job.num_tokens && e - t < kQueryBlock && job.rows[e].table == job.rows[t].table &&
             job.rows[e].pos == job.rows[e - 1].pos + 1)
        ++e;
      blocks_.push_back({t, e});
      t = e;
    }
  }
  // When every block holds one query (decode steps) the per-query path below serves better: it
  // prefetches the next tile.
  if (!blocks_.empty() && static_cast<int64_t>(blocks_.size()) < job.num_tokens) {
    pool.parallel_for(static_cast<int64_t>(blocks_.size()) * job.num_kv_heads, [&](int64_t task, int thread_idx) {
      const auto [t0, t1] = blocks_[task / job.num_kv_heads];
      const int32_t kvh = static_cast<int32_t>(task % job.num_kv_heads);
      AttnScratch& sc = scratch_[thread_idx];
      const int64_t nq = t1 - t0;
      const int64_t qf = static_cast<int64_t>(group) * hd;
      if (sc.qblock.size() < static_cast<size_t>(nq * qf)) sc.qblock.resize(nq * qf);
      if (sc.pos.size() < static_cast<size_t>(nq)) sc.pos.resize(nq);
      for (int64_t i = 0; i < nq; ++i) {
        scaled_queries(job, t0 + i, kvh, hd, sc.qblock.data() + i * qf);
        sc.pos[i] = job.rows[t0 + i].pos;
      }
      float* out = job.out + (t0 * job.num_heads + static_cast<int64_t>(kvh) * group) * hd;
      attend_group_block(*job.rows[t0].table, kvh, sc.qblock.data(), group, static_cast<int32_t>(nq), sc.pos.data(), out,
                         static_cast<int64_t>(job.num_heads) * hd, &sc);
    }, serial);
    return;
  }
  pool.parallel_for(job.num_tokens * job.num_kv_heads, [&](int64_t unit, int thread_idx) {
    const int64_t tok = unit / job.num_kv_heads;
    const int32_t kvh = static_cast<int32_t>(unit % job.num_kv_heads);
    AttnScratch& sc = scratch_[thread_idx];
    scaled_queries(job, tok, kvh, hd, sc.q.data());
    float* out = job.out + (tok * job.num_heads + static_cast<int64_t>(kvh) * group) * hd;
    attend_group(*job.rows[tok].table, kvh, sc.q.data(), group, job.rows[tok].pos, out, &sc, job.window);
  }, serial);
}

void AttentionRunner::run_split(const AttnJob& job, ThreadPool& pool, int64_t chunk) {
  const int32_t hd = job.head_dim;
  const int32_t group = job.num_heads / job.num_kv_heads;
  const int64_t pf = attn_partial_floats(group, hd);
  const int64_t units = job.num_tokens * job.num_kv_heads;
  tasks_.clear();
  unit_first_.resize(units);
  unit_offset_.resize(units);
  int64_t offset = 0;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t pos = job.rows[u / job.num_kv_heads].pos;
    const int64_t sb = attn_first_key(pos, job.window) / kSuperTokens, se = pos / kSuperTokens + 1;
    unit_first_[u] = sb;
    unit_offset_[u] = offset;
    offset += se - sb;
    for (int64_t s = sb; s < se; s += chunk) tasks_.push_back({u, s, std::min(se, s + chunk)});
  }
  if (partials_.size() < static_cast<size_t>(offset * pf)) partials_.resize(offset * pf);
  // Pass 1: every super-segment's partial, each from an empty state.
  pool.parallel_for(static_cast<int64_t>(tasks_.size()), [&](int64_t ti, int thread_idx) {
    const Task& t = tasks_[ti];
    const int64_t tok = t.unit / job.num_kv_heads;
    const int32_t kvh = static_cast<int32_t>(t.unit % job.num_kv_heads);
    const int64_t pos = job.rows[tok].pos;
    const int64_t first_key = attn_first_key(pos, job.window);
    AttnScratch& sc = scratch_[thread_idx];
    scaled_queries(job, tok, kvh, hd, sc.q.data());
    for (int64_t s = t.s_begin; s < t.s_end; ++s) {
      const int64_t k0 = std::max(s * kSuperTokens, first_key);
      const int64_t k1 = std::min((s + 1) * kSuperTokens, pos + 1);
      float* part = partials_.data() + (unit_offset_[t.unit] + s - unit_first_[t.unit]) * pf;
      attend_super(*job.rows[tok].table, kvh, sc.q.data(), group, pos, k0, k1, part, &sc);
    }
  });
  // Pass 2: per unit, the partials merged in position order, exactly as attend_group() does.
  pool.parallel_for(units, [&](int64_t u, int thread_idx) {
    const int64_t tok = u / job.num_kv_heads;
    const int32_t kvh = static_cast<int32_t>(u % job.num_kv_heads);
    const int64_t pos = job.rows[tok].pos;
    const int64_t n = pos / kSuperTokens + 1 - unit_first_[u];
    float* total = scratch_[thread_idx].total.data();
    const float* parts = partials_.data() + unit_offset_[u] * pf;
    std::memcpy(total, parts, sizeof(float) * pf);
    for (int64_t i = 1; i < n; ++i) merge_attn_partial(total, parts + i * pf, group, hd);
    finish_attn_partial(total, group, hd, job.out + (tok * job.num_heads + static_cast<int64_t>(kvh) * group) * hd);
  });
}

}  // namespace hz
