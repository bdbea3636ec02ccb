#include "kv/kv_cache.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "kernels/kernels.h"

namespace hz {


KvPrecision KvCacheConfig::resolved_precision() const {
  KvPrecision p;
  if (precision) {
    p = *precision;
  } else {
    HZ_CHECK(dtype == DType::kF16 || dtype == DType::kF32);
    p.hot = p.cold = dtype == DType::kF32 ? KvType::kF32 : KvType::kF16;
  }
  return kv_canonical(p);
}

KvGeometry KvCacheConfig::geometry() const {
  KvGeometry g;
  g.num_layers = static_cast<uint64_t>(num_layers);
  g.num_streams = 2;
  g.num_heads = static_cast<uint64_t>(num_kv_heads);
  g.head_dim = static_cast<uint64_t>(head_dim);
  return g;
}

KvCache::KvCache(const KvCacheConfig& cfg)
    : cfg_(cfg), prec_(cfg.resolved_precision()), pool_(cfg.num_blocks), staging_of_(cfg.num_blocks, -1), sealed_upto_(cfg.num_blocks, 0) {
  HZ_CHECK(cfg.block_tokens >= 16 && cfg.block_tokens % 16 == 0);
  HZ_CHECK(cfg.head_dim > 0 && cfg.num_kv_heads > 0 && cfg.num_layers > 0);
  arena_types_ = prec_.arena_types();
  sink_blocks_ = static_cast<int64_t>(kv_sink_blocks(prec_, static_cast<uint64_t>(cfg.block_tokens)));
  exact_codec_ = kv_staging_type(prec_);
  // Unstaged: one f16 or f32 type for every position and stream, written and read in place.
  const KvTypePair hot = prec_.hot_types();
  staged_ = !(!prec_.mixed() && hot.same() && hot.k == exact_codec_);
  for (int32_t st = 0; st < 2; ++st) {
    plane_bytes_[st] = kv_plane_bytes(cfg.geometry(), arena_types_[st], cfg.block_tokens);
    // The planner's layout and the codecs' row sizes must describe the same bytes.
    HZ_CHECK_MSG(plane_bytes_[st] == plane_bytes_for(arena_types_[st]), "KV plane size disagrees with the planner");
  }
  HZ_CHECK_MSG(block_bytes() == kv_block_bytes(cfg.geometry(), arena_types_, cfg.block_tokens),
               "KV block size disagrees with the planner");
  exact_row_bytes_ = kernels::kv_row_elem_bytes(exact_codec_, cfg.head_dim);
  staging_plane_bytes_ = exact_row_bytes_ * cfg.block_tokens * cfg.num_kv_heads;
  // calloc: never-written slots read as zeros, and large pools are mapped lazily (pages are
  // committed as blocks are first written, so RSS follows use, not the budget).
  arena_.reset(static_cast<uint8_t*>(std::calloc(total_bytes() > 0 ? total_bytes() : 1, 1)));
  HZ_CHECK_MSG(arena_ != nullptr, "KV cache allocation failed");
  // Transparent huge pages where the system allows them (madvise mode): attention reads one tile
  // per block and blocks sit in different 4 KiB pages, so small pages cost a TLB miss per tile.
  // Advisory only (failure is harmless); pages still commit lazily, 2 MiB at a time.
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(arena_.get()) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(arena_.get()) + total_bytes()) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  pool_.set_on_unreferenced([this](int32_t b) { on_unreferenced(b); });
}

void KvCache::set_hot_retention(int32_t max_blocks) {
  HZ_CHECK(max_blocks >= 0);
  max_retained_ = max_blocks;
  retained_.assign(cfg_.num_blocks, 0);
  retained_pos_.resize(cfg_.num_blocks);
  while (num_retained() > max_retained_) release_staging(retained_lru_.front());
}

void KvCache::retain(int32_t block) {
  if (retained_[block] != 0) return;
  retained_[block] = 1;
  retained_pos_[block] = retained_lru_.insert(retained_lru_.end(), block);
  while (num_retained() > max_retained_) release_staging(retained_lru_.front());
}

void KvCache::on_unreferenced(int32_t block) {
  if (max_retained_ > 0 && pool_.cacheable(block) && hot_form_available(block)) {
    retain(block);  // a finished sequence's newest cached blocks: the likeliest place to attach
    return;
  }
  release_staging(block);
}

void KvCache::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

uint64_t KvCache::head_elem_offset(kernels::KvCodec c, int32_t head) const {
  return static_cast<uint64_t>(head) * cfg_.block_tokens * kernels::kv_row_elem_bytes(c, cfg_.head_dim);
}

uint64_t KvCache::head_scale_offset(kernels::KvCodec c, int32_t head) const {
  const uint64_t elems = head_elem_offset(c, cfg_.num_kv_heads);
  const uint64_t per_head = static_cast<uint64_t>(kernels::kv_head_scale_bytes(c, cfg_.head_dim));
  if (per_head > 0) return elems + per_head * static_cast<uint64_t>(head);  // fp8, int3, int2
  return elems + static_cast<uint64_t>(head) * cfg_.block_tokens * kernels::kv_row_scale_bytes(c, cfg_.head_dim);
}

uint64_t KvCache::plane_bytes_for(kernels::KvCodec c) const {
  if (c == kernels::KvCodec::kFp8) return head_scale_offset(c, cfg_.num_kv_heads);
  return head_scale_offset(c, cfg_.num_kv_heads);
}

uint8_t* KvCache::write_row(int32_t block, int32_t layer, int32_t stream, int32_t head, int32_t slot) {
  const uint64_t off = (static_cast<uint64_t>(head) * cfg_.block_tokens + slot) * exact_row_bytes_;
  if (!staged_) return plane_mut(block, layer, stream) + off;
  int32_t s = staging_of_[block];
  if (s >= 0 && !retained_.empty() && retained_[block] != 0) {
    // A retained block is never written by a sequence (cached blocks are copied on write): it
    // was evicted and handed out again, so its old staging copy is stale.
    release_staging(block);
    s = -1;
  }
  if (s < 0) {
    if (!staging_free_.empty()) {
      s = staging_free_.back();
      staging_free_.pop_back();
    } else {
      s = static_cast<int32_t>(staging_.size());
      staging_.emplace_back(new uint8_t[2 * staging_plane_bytes_ * cfg_.num_layers]());
    }
    staging_of_[block] = s;
    sealed_upto_[block] = 0;
    staging_high_water_ = std::max(staging_high_water_, num_staging_in_use());
  }
  return staging_plane(s, layer, stream) + off;
}

void KvCache::release_staging(int32_t block) {
  if (!retained_.empty() && retained_[block] != 0) {
    retained_[block] = 0;
    retained_lru_.erase(retained_pos_[block]);
  }
  const int32_t s = staging_of_[block];
  if (s < 0) return;
  staging_of_[block] = -1;
  staging_free_.push_back(s);
}

const uint8_t* KvCache::exact_plane(int32_t block, int32_t layer, int32_t stream) const {
  if (!staged_) return plane(block, layer, stream);
  const int32_t s = staging_of_[block];
  return s < 0 ? nullptr : staging_plane(s, layer, stream);
}

void KvCache::encode_head(kernels::KvCodec c, int32_t block, int32_t layer, int32_t stream, int32_t head, float* tmp,
                          uint8_t* plane_out) const {
  const uint8_t* src = exact_plane(block, layer, stream);
  HZ_CHECK_MSG(src != nullptr, "encode of a block without a staging copy");
  const int64_t n = static_cast<int64_t>(cfg_.block_tokens) * cfg_.head_dim;
  src += static_cast<uint64_t>(head) * cfg_.block_tokens * exact_row_bytes_;
  if (exact_codec_ == kernels::KvCodec::kF16) {
    kernels::f16_to_f32_row(reinterpret_cast<const uint16_t*>(src), tmp, n);
  } else {
    std::memcpy(tmp, src, sizeof(float) * n);
  }
  kernels::encode_kv_rows(c, tmp, cfg_.block_tokens, cfg_.head_dim, plane_out + head_elem_offset(c, head),
                          plane_out + head_scale_offset(c, head));
}

void KvCache::encode_arena_plane(int32_t block, int32_t layer, int32_t stream, float* tmp) {
  const kernels::KvCodec c = arena_types_[stream];
  for (int32_t h = 0; h < cfg_.num_kv_heads; ++h) encode_head(c, block, layer, stream, h, tmp, plane_mut(block, layer, stream));
}

int64_t KvCache::finalized_blocks(int64_t num_positions) const {
  const int64_t lag = prec_.hot_window > 0 ? static_cast<int64_t>(prec_.hot_window) - 1 : 0;
  const int64_t done = num_positions - lag;
  return done > 0 ? done / cfg_.block_tokens : 0;
}

void KvCache::commit(const BlockRef* block_table, int64_t num_positions) {
  if (!staged_) return;
  std::vector<float> tmp;
  // Staged blocks form a suffix of a sequence's table, after its sink blocks (kept staged): walk
  // back from the newest finalized one.
  for (int64_t i = finalized_blocks(num_positions) - 1; i >= sink_blocks_; --i) {
    if (block_table[i].is_far()) break;
    const int32_t b = block_table[i].idx;
    // Older blocks were finalized by earlier calls (released, or retained for the prefix cache).
    if (staging_of_[b] < 0 || (!retained_.empty() && retained_[b] != 0)) break;
    if (tmp.empty()) tmp.resize(static_cast<size_t>(cfg_.block_tokens) * cfg_.head_dim);
    for (int32_t l = sealed_upto_[b]; l < cfg_.num_layers; ++l) {
      for (int32_t st = 0; st < 2; ++st) encode_arena_plane(b, l, st, tmp.data());
    }
    sealed_upto_[b] = cfg_.num_layers;
    // Not only cacheable blocks: the scheduler registers a step's blocks after this call, and a
    // block that a large chunk both completed and finalized would otherwise lose its hot form
    // before it is registered. Retained blocks that are never registered go when released.
    if (max_retained_ > 0) {
      retain(b);
    } else {
      release_staging(b);
    }
  }
}

void KvCache::seal_layer(int32_t layer, const BlockRef* block_table, int64_t begin, int64_t end) {
  if (!staged_ || end <= begin) return;
  const int64_t bt = cfg_.block_tokens;
  std::vector<float> tmp;
  // Blocks whose last position lies in [begin, end): those writes completed them.
  for (int64_t i = begin / bt; (i + 1) * bt <= end; ++i) {
    if ((i + 1) * bt - 1 < begin) continue;
    if (block_table[i].is_far()) continue;
    const int32_t b = block_table[i].idx;
    if (staging_of_[b] < 0 || sealed_upto_[b] != layer) continue;
    if (tmp.empty()) tmp.resize(static_cast<size_t>(bt) * cfg_.head_dim);
    for (int32_t st = 0; st < 2; ++st) encode_arena_plane(b, layer, st, tmp.data());
    sealed_upto_[b] = layer + 1;
  }
}

bool KvCache::reopen_block(BlockRef block) {
  if (block.is_far()) return false;
  if (!staged_) return true;
  if (staging_of_[block.idx] < 0) return false;
  sealed_upto_[block.idx] = 0;
  return true;
}

std::vector<FarSegment> KvCache::far_segments() const {
  std::vector<FarSegment> out;
  for (int32_t st = 0; st < 2; ++st) {
    const kernels::KvCodec c = arena_types_[st];
    const uint64_t elems = static_cast<uint64_t>(cfg_.block_tokens) * kernels::kv_row_elem_bytes(c, cfg_.head_dim);
    const uint64_t scales = static_cast<uint64_t>(kernels::kv_head_scale_bytes(c, cfg_.head_dim)) +
                            static_cast<uint64_t>(cfg_.block_tokens) * kernels::kv_row_scale_bytes(c, cfg_.head_dim);
    const uint64_t plane = st != 0 ? plane_bytes_[0] : 0;
    for (int32_t h = 0; h < cfg_.num_kv_heads; ++h) {
      FarSegment g;
      g.offset = plane + head_elem_offset(c, h);
      g.bytes = elems;
      g.offset2 = plane + head_scale_offset(c, h);
      g.bytes2 = scales;
      out.push_back(g);
    }
  }
  return out;
}

bool KvCache::spillable(int32_t block) const {
  if (far_ == nullptr || far_->num_free() == 0) return false;
  return staging_of_[block] < 0 || (!retained_.empty() && retained_[block] != 0);
}

std::optional<int32_t> KvCache::spill(int32_t block) {
  if (!spillable(block)) return std::nullopt;
  release_staging(block);  // a retained hot copy: the far block is only ever read cold
  auto slot = far_->put([&](int32_t layer) { return plane(block, layer, 0); });
  return slot;
}

void KvCache::copy_block(int32_t src, int32_t dst) {
  std::memcpy(plane_mut(dst, 0, 0), plane(src, 0, 0), block_bytes());
  release_staging(dst);
  if (staging_of_[src] >= 0) {
    uint8_t* d = write_row(dst, 0, 0, 0, 0);  // creates dst's staging copy
    std::memcpy(d, staging_plane(staging_of_[src], 0, 0), 2 * staging_plane_bytes_ * cfg_.num_layers);
    sealed_upto_[dst] = sealed_upto_[src];
  }
}

namespace {

// One block of `from` planes to `to` planes, through f32, head by head (fp8's scale is per head).
void transcode(const KvCache& kv, KvTypePair from, const uint8_t* src, KvTypePair to, uint8_t* dst) {
  const KvCacheConfig& c = kv.config();
  std::vector<float> tmp(static_cast<size_t>(c.block_tokens) * c.head_dim);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    for (int32_t st = 0; st < 2; ++st) {
      const kernels::KvCodec f = from[st], t = to[st];
      for (int32_t h = 0; h < c.num_kv_heads; ++h) {
        kernels::decode_kv_rows(f, src + kv.head_elem_offset(f, h), src + kv.head_scale_offset(f, h), c.block_tokens,
                                c.head_dim, tmp.data());
        kernels::encode_kv_rows(t, tmp.data(), c.block_tokens, c.head_dim, dst + kv.head_elem_offset(t, h),
                                dst + kv.head_scale_offset(t, h));
      }
      src += kv.plane_bytes_for(f);
      dst += kv.plane_bytes_for(t);
    }
  }
}

}  // namespace

void KvCache::transcode_out(int32_t block, KvTypePair to, uint8_t* out) const {
  transcode(*this, arena_types_, block_data(block), to, out);
}

void KvCache::transcode_in(int32_t block, KvTypePair from, const uint8_t* in) {
  transcode(*this, from, in, arena_types_, block_data_mut(block));
}

KvMemory KvCache::memory() const {
  KvMemory m;
  m.block_tokens = cfg_.block_tokens;
  m.precision = prec_;
  m.arena.type = arena_types_.k;
  m.arena.type_v = arena_types_.v;
  m.arena.bytes_per_block = block_bytes();
  m.arena.blocks_total = cfg_.num_blocks;
  m.arena.blocks_in_use = pool_.num_used();
  m.arena.blocks_cached = pool_.num_cached();
  m.staging.type = m.staging.type_v = exact_codec_ == kernels::KvCodec::kF32 ? KvType::kF32 : KvType::kF16;
  m.staging.bytes_per_block = 2 * staging_plane_bytes_ * cfg_.num_layers;
  m.staging.blocks_total = num_staging_slots();
  m.staging.blocks_in_use = num_staging_in_use();
  return m;
}

}  // namespace hz
