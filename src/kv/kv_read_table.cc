#include "kv/kv_read_table.h"

#include <algorithm>

#include "base/check.h"

namespace hz {
namespace {

bool has_scales(kernels::KvCodec c) {  // fp8, int8, int4 and the per-channel types
  return c == kernels::KvCodec::kFp8 || kernels::kv_grouped(c) || kernels::kv_channel_scaled(c);
}

// Key range of a query at `pos` with a sliding window (as model/attention.h's attn_first_key).
int64_t first_key(int64_t pos, int64_t window) { return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0; }

}  // namespace

void KvReadTable::reset(const KvCache& kv, const BlockRef* blocks, int64_t q_begin, int64_t q_end, int64_t window) {
  kv_ = &kv;
  blocks_ = blocks;
  const KvCacheConfig& c = kv.config();
  head_dim_ = c.head_dim;
  block_tokens_ = c.block_tokens;
  staged_ = kv.staged();
  layer_ = -1;
  q_begin_ = q_begin;
  q_end_ = q_end;
  sink_blocks_ = kv.sink_blocks();
  const int64_t bt = block_tokens_;
  const int64_t hw = kv.precision().hot_window;
  if (q_end <= q_begin) {  // no queries this step: nothing is read
    first_block_ = exact_begin_ = near_begin_ = near_end_ = cold_end_ = 0;
    return;
  }
  first_block_ = first_key(q_begin, window) / bt;
  exact_begin_ = q_begin / bt;
  near_end_ = (q_end - 1) / bt + 1;
  // Hot readers: a query at p reads block i hot when (i + 1) * bt > p - hw + 1 (kv/kv_cache.h).
  near_begin_ = std::max(first_block_, hw > 0 ? std::max<int64_t>(0, q_begin - hw + 1) / bt : exact_begin_);
  near_begin_ = std::min(near_begin_, exact_begin_);
  const int64_t y = q_end - 1 - (hw > 0 ? hw - 1 : 0);  // cold readers: (i + 1) * bt <= p - hw + 1
  cold_end_ = staged_ ? std::max(first_block_, y >= 0 ? y / bt : 0) : near_end_;
  for (KvType t : all_kv_types()) {
    Strides& s = strides_[static_cast<size_t>(t)];
    s.row_elems = static_cast<uint64_t>(kernels::kv_row_elem_bytes(t, head_dim_));
    s.head_elems = s.row_elems * bt;
    s.row_scales = static_cast<uint64_t>(kernels::kv_row_scale_bytes(t, head_dim_));
    s.head_scales = static_cast<uint64_t>(kernels::kv_head_scale_bytes(t, head_dim_)) + s.row_scales * bt;
    s.scales = kv.head_scale_offset(t, 0);
  }
  enc_plane_bytes_ = 0;
  const KvTypePair arena = kv.arena_types(), hot = kv.precision().hot_types();
  for (KvType t : {arena.k, arena.v, hot.k, hot.v}) enc_plane_bytes_ = std::max(enc_plane_bytes_, kv.plane_bytes_for(t));
}

KvBlockDesc KvReadTable::stored(BlockRef b, int32_t layer, bool exact) const {
  KvBlockDesc d;
  if (exact) {
    d.k_codec = d.v_codec = kv_->exact_codec();
    d.k_elems = kv_->exact_plane(b.idx, layer, 0);
    d.v_elems = kv_->exact_plane(b.idx, layer, 1);
    HZ_DCHECK(d.k_elems != nullptr);
    return d;
  }
  d.k_codec = kv_->arena_type(0);
  d.v_codec = kv_->arena_type(1);
  d.k_elems = kv_->plane(b, layer, 0);
  d.v_elems = kv_->plane(b, layer, 1);
  if (has_scales(d.k_codec)) d.k_scales = d.k_elems + strides_[static_cast<size_t>(d.k_codec)].scales;
  if (has_scales(d.v_codec)) d.v_scales = d.v_elems + strides_[static_cast<size_t>(d.v_codec)].scales;
  return d;
}

void KvReadTable::add_encode(int64_t block_idx, KvBlockDesc* d, KvTypePair c) {
  d->k_codec = c.k;
  d->v_codec = c.v;
  // The planes are placed once enc_ has its final size (plan_layer).
  jobs_.push_back({block_idx, d, c});
  ++num_encodes_;
}

void KvReadTable::add_hot(int64_t block_idx, KvBlockDesc* d, int32_t layer) {
  HZ_CHECK_MSG(blocks_[block_idx].is_pool(), "a block read hot is on the far tier");
  const KvTypePair hot = kv_->precision().hot_types();
  if (hot.k == kv_->exact_codec() && hot.v == kv_->exact_codec()) {
    *d = stored(blocks_[block_idx], layer, true);
  } else {
    add_encode(block_idx, d, hot);
  }
}

void KvReadTable::plan_layer(int32_t layer) {
  layer_ = layer;
  jobs_.clear();
  num_encodes_ = 0;
  cold_.resize(static_cast<size_t>(near_end_));
  for (int64_t i = std::max(first_block_, sink_blocks_); i < cold_end_; ++i) {  // sink blocks: never read cold
    const BlockRef b = blocks_[i];
    if (b.is_far()) {
      cold_[i] = stored(b, layer, false);
      jobs_.push_back({i, nullptr, kv_->arena_types()});
    } else if (!staged_ || kv_->arena_valid(b.idx, layer)) {
      cold_[i] = stored(b, layer, false);
    } else {
      add_encode(i, &cold_[i], kv_->arena_types());  // not sealed: its arena form made from staging
    }
  }
  if (staged_) {
    const int64_t bt = block_tokens_, hw = kv_->precision().hot_window;
    // Sink blocks behind the near range: read hot by every query.
    const int64_t far_sinks = std::min(sink_blocks_, near_begin_);
    sinks_.resize(static_cast<size_t>(std::max<int64_t>(far_sinks, 0)));
    for (int64_t i = first_block_; i < far_sinks; ++i) add_hot(i, &sinks_[i], layer);
    near_.resize(static_cast<size_t>(2 * (near_end_ - near_begin_)));
    for (int64_t i = near_begin_; i < near_end_; ++i) {
      KvBlockDesc* exact = &near_[2 * (i - near_begin_)];
      if (i >= exact_begin_) *exact = stored(blocks_[i], layer, true);
      // Read hot by some query p in [max(q_begin, end of block), end of block + hw - 1).
      const int64_t b1 = (i + 1) * bt;
      const bool sink_read = i < sink_blocks_ && q_end_ > b1;
      if (!sink_read && (hw == 0 || std::max(q_begin_, b1) >= std::min(q_end_, b1 + hw - 1))) continue;
      add_hot(i, exact + 1, layer);
    }
  }
  enc_.resize(static_cast<size_t>(num_encodes_) * 2 * enc_plane_bytes_);
  int32_t slot = 0;
  for (Job& j : jobs_) {
    if (j.desc == nullptr) continue;
    uint8_t* k = enc_.data() + (2 * static_cast<uint64_t>(slot++)) * enc_plane_bytes_;
    j.desc->k_elems = k;
    j.desc->v_elems = k + enc_plane_bytes_;
    j.desc->k_scales = has_scales(j.codecs.k) ? j.desc->k_elems + strides_[static_cast<size_t>(j.codecs.k)].scales : nullptr;
    j.desc->v_scales = has_scales(j.codecs.v) ? j.desc->v_elems + strides_[static_cast<size_t>(j.codecs.v)].scales : nullptr;
  }
}

void KvReadTable::run_job(const Job& j, float* tmp) const {
  const int32_t num_heads = kv_->config().num_kv_heads;
  const int32_t block = blocks_[j.block_idx].idx;
  if (j.desc == nullptr) {
    // A block read from disk: each head's K and V rows and scales against their checksums (a
    // mismatch is recorded; the engine recomputes the sequence instead of serving it).
    for (int32_t seg = 0; seg < 2 * num_heads; ++seg) kv_->far()->verify(block, layer_, seg);
    return;
  }
  // A staged block read in a form the arena does not hold: encoded from its staging copy by the
  // encoder commit() uses, so readers see the bytes the arena will hold.
  uint8_t* planes[2] = {const_cast<uint8_t*>(j.desc->k_elems), const_cast<uint8_t*>(j.desc->v_elems)};
  for (int32_t st = 0; st < 2; ++st) {
    for (int32_t h = 0; h < num_heads; ++h) kv_->encode_head(j.codecs[st], block, layer_, st, h, tmp, planes[st]);
  }
}

void KvReadTable::bind_layer(int32_t layer, ThreadPool* pool) {
  plan_layer(layer);
  std::vector<float> tmp(static_cast<size_t>(block_tokens_) * head_dim_);
  if (pool == nullptr || jobs_.size() < 2) {
    for (const Job& j : jobs_) run_job(j, tmp.data());
    return;
  }
  std::vector<std::vector<float>> tmps(pool->num_threads(), tmp);
  pool->parallel_for(static_cast<int64_t>(jobs_.size()),
                     [&](int64_t i, int thread_idx) { run_job(jobs_[i], tmps[thread_idx].data()); });
}

void KvReader::begin_step(const KvCache& kv, size_t num_seqs) {
  kv_ = &kv;
  if (tables_.size() < num_seqs) tables_.resize(num_seqs);
  num_tables_ = num_seqs;
}

void KvReader::bind_layer(int32_t layer, ThreadPool* pool) {
  FarTier* far = kv_->far();
  far_pass_ = far != nullptr && far->num_used() > 0;
  if (far_pass_) far->begin_layer(layer);  // what comes from disk is checked in this pass
  jobs_.clear();
  for (size_t i = 0; i < num_tables_; ++i) {
    tables_[i].plan_layer(layer);
    for (const auto& j : tables_[i].jobs_) jobs_.push_back({&tables_[i], &j});
  }
  const size_t rows = static_cast<size_t>(kv_->config().block_tokens) * kv_->config().head_dim;
  const size_t threads = pool != nullptr ? static_cast<size_t>(pool->num_threads()) : 1;
  if (tmp_.size() < threads) tmp_.resize(threads);
  for (auto& t : tmp_) t.resize(rows);
  if (pool == nullptr || jobs_.size() < 2) {
    for (const auto& [t, j] : jobs_) t->run_job(*j, tmp_[0].data());
    return;
  }
  pool->parallel_for(static_cast<int64_t>(jobs_.size()), [&](int64_t i, int thread_idx) {
    jobs_[i].first->run_job(*jobs_[i].second, tmp_[thread_idx].data());
  });
}

void KvReader::end_layer(int32_t layer) {
  if (far_pass_) kv_->far()->drop(layer);
  far_pass_ = false;
}

}  // namespace hz
