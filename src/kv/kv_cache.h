// KvCache: the storage of the paged KV cache — an arena of fixed-size blocks, each holding K and V
// of `block_tokens` positions for every layer in the arena's element type — plus the BlockPool that
// hands them out and, for compact types, the f16 staging copies of blocks still read exactly.
// Sequences own block tables (vectors of BlockRef, kv/block_ref.h); position p of a sequence lives
// in block table[p / block_tokens] at slot p % block_tokens. Readers see blocks through a
// KvReadTable (kv/kv_read_table.h), which applies the position rule below.
//
// Position rule (what a query reads depends on positions only, never on chunking): a query at p
// reads the block containing p exactly (f16, or f32 for an f32 cache), blocks overlapping its hot
// window [p - hot_window + 1, p] in the hot type, older blocks in the cold type (the cache type when
// there is no window) — except sink blocks (KvPrecision::sink_tokens), read in the hot type by every
// later query: they keep their staging copy while their sequence holds them (commit() skips them)
// and are never spilled to the far tier; their arena copy is encoded all the same (cold form). Writes go to a staging copy; a block is encoded into the arena once no later
// query reads it exactly or hot (commit()); until then readers that need its encoded form encode it
// on the fly with the same function, so they see the same bytes.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "base/check.h"
#include "kernels/kv_codec.h"
#include "kv/block_pool.h"
#include "kv/block_ref.h"
#include "kv/far_tier.h"
#include "kv/kv_memory.h"
#include "kv/kv_storage.h"
#include "kv/kv_layout.h"
#include "tensor/dtype.h"

namespace hz {

struct KvCacheConfig {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 16;  // positions per block (16..256, a multiple of 16)
  DType dtype = DType::kF16;  // shorthand for a plain kF32 / kF16 cache; `precision` overrides it
  int32_t num_blocks = 0;
  std::optional<KvPrecision> precision;  // element types and hot window

  // `precision`, or `dtype` as a KvPrecision; a window whose hot and cold types match is dropped.
  KvPrecision resolved_precision() const;
  KvGeometry geometry() const;
};

// How a query reads one block (see the position rule above).
enum class KvRead { kExact, kHot, kCold };

// The CPU arena: implements KvStorage (kv/kv_storage.h) for the KV manager.
class KvCache : public KvStorage {
 public:
  explicit KvCache(const KvCacheConfig& cfg);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheConfig& config() const { return cfg_; }
  const KvPrecision& precision() const { return prec_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // Arena types of K (stream 0) and V (stream 1): the cold types with a hot window, else the cache
  // types. Equal the planner's layout.
  KvTypePair arena_types() const { return arena_types_; }
  KvType arena_type(int32_t stream) const { return arena_types_[stream]; }
  // Whether writes go through staging (any type other than a plain f16 / f32 cache).
  bool staged() const { return staged_; }
  // Element type of written rows and exact reads: kF32 for f32 caches, else kF16.
  kernels::KvCodec exact_codec() const { return exact_codec_; }

  // Bytes of one plane (K or V of one layer in one block), of one layer (K plane, then V plane) and
  // of one block, as the planner computes.
  uint64_t plane_bytes(int32_t stream) const { return plane_bytes_[stream]; }
  uint64_t layer_bytes() const { return plane_bytes_[0] + plane_bytes_[1]; }
  uint64_t block_bytes() const { return layer_bytes() * cfg_.num_layers; }
  uint64_t total_bytes() const { return block_bytes() * cfg_.num_blocks; }
  uint64_t exact_row_bytes() const { return exact_row_bytes_; }

  // The row that position `slot` of `block` writes for (layer, stream 0 = K / 1 = V, head), in
  // exact_codec(); creates the block's staging copy when needed. Engine thread only.
  uint8_t* write_row(int32_t block, int32_t layer, int32_t stream, int32_t head, int32_t slot);
  uint8_t* write_row(BlockRef block, int32_t layer, int32_t stream, int32_t head, int32_t slot) {
    HZ_DCHECK(block.is_pool());  // far blocks are finalized: never written
    return write_row(block.idx, layer, stream, head, slot);
  }

  // The position rule: how a query at `query_pos` reads block `block_index` of its sequence.
  KvRead read_form(int64_t query_pos, int64_t block_index) const {
    const int64_t b0 = block_index * cfg_.block_tokens, b1 = b0 + cfg_.block_tokens;
    if (query_pos >= b0 && query_pos < b1) return KvRead::kExact;
    if (block_index < sink_blocks_) return KvRead::kHot;
    if (prec_.hot_window > 0 && b1 > query_pos - static_cast<int64_t>(prec_.hot_window) + 1) return KvRead::kHot;
    return KvRead::kCold;
  }
  // The exact plane [num_kv_heads][block_tokens][head_dim] in exact_codec(): the staging copy, or
  // the arena for unstaged caches. Null when a staged cache has no staging copy of the block.
  const uint8_t* exact_plane(int32_t block, int32_t layer, int32_t stream) const;
  bool has_staging(int32_t block) const { return staging_of_[block] >= 0; }
  // Arena plane of pool block `block`: elements [num_kv_heads][block_tokens][row elem bytes], then scales.
  const uint8_t* plane(int32_t block, int32_t layer, int32_t stream) const {
    return arena_.get() + static_cast<uint64_t>(block) * block_bytes() + static_cast<uint64_t>(layer) * layer_bytes() +
           (stream != 0 ? plane_bytes_[0] : 0);
  }
  // The same for any block: a far block's bytes through the far tier's mapping.
  const uint8_t* plane(BlockRef block, int32_t layer, int32_t stream) const {
    if (block.is_far()) return far_->layer_data(block.idx, layer) + (stream != 0 ? plane_bytes_[0] : 0);
    return plane(block.idx, layer, stream);
  }

  // Far blocks: a running sequence's finalized blocks moved to disk (kv/far_tier.h) to make room
  // in the pool. Block tables hold them as BlockRef::far(slot); they have no staging copy and are
  // read cold, exactly as before the move. Not owned; set once, before use.
  void attach_far(FarTier* far) { far_ = far; }
  FarTier* far() const { return far_; }
  // Whether pool block `block` can move to the far tier: finalized — fully encoded, no staging
  // copy other than a retained one — and the far tier has room.
  bool spillable(int32_t block) const;
  // Writes pool block `block` to the far tier and returns its far slot; its pool reference is the
  // caller's to drop. nullopt when not spillable or the far tier cannot take it.
  std::optional<int32_t> spill(int32_t block) override;
  // The far tier's checksum segments: per stream (K, V) and KV head, that head's rows and scales
  // in a layer's two planes (segment stream * num_kv_heads + head), as attention reads them.
  std::vector<FarSegment> far_segments() const;
  // A far slot no sequence holds any more.
  void release_far_slot(int32_t slot) override { far_->release(slot); }
  // Drops a block reference of a sequence: the pool's, or the far tier's slot.
  void release_block(BlockRef block) {
    if (block.is_far()) {
      release_far_slot(block.idx);
    } else {
      pool_.unref(block.idx);
    }
  }
  // All of `block`'s arena bytes (block_bytes(): every layer's K and V planes), contiguous: what the
  // disk tier stores and restores. Valid for finalized blocks (no staging copy left).
  const uint8_t* block_data(int32_t block) const { return plane(block, 0, 0); }
  uint8_t* block_data_mut(int32_t block) { return plane_mut(block, 0, 0); }
  // Bytes of one block with K planes of type t.k and V planes of type t.v (the arena's layout).
  uint64_t block_bytes_for(KvTypePair t) const { return (plane_bytes_for(t.k) + plane_bytes_for(t.v)) * cfg_.num_layers; }
  // Re-quantization for a disk tier in other types: `block`'s arena bytes decoded and encoded as a
  // block of types `to` into `out` (block_bytes_for(to) bytes), and back (`in` of types `from` into
  // the arena). Deterministic; lossy when a target type is narrower.
  void transcode_out(int32_t block, KvTypePair to, uint8_t* out) const;
  void transcode_in(int32_t block, KvTypePair from, const uint8_t* in);
  // Offsets of head `head`'s first row elements and scales inside a plane of type `c`.
  uint64_t head_elem_offset(kernels::KvCodec c, int32_t head) const;
  uint64_t head_scale_offset(kernels::KvCodec c, int32_t head) const;  // from the plane start
  // Bytes of one plane in codec `c` (scratch sizing for on-the-fly encodes).
  uint64_t plane_bytes_for(kernels::KvCodec c) const;

  // Encodes the staging copy of (block, layer, stream, head) in codec `c` into `plane_out`, laid out
  // as a plane of type `c` (only that head's elements and scales are written). `tmp` holds
  // block_tokens * head_dim floats. The one encoder used by commit() and by on-the-fly readers.
  void encode_head(kernels::KvCodec c, int32_t block, int32_t layer, int32_t stream, int32_t head, float* tmp,
                   uint8_t* plane_out) const;

  // After layer `layer` wrote positions [begin, end) of a sequence: encodes that layer of every
  // block those writes completed into the arena (its staging copy stays while queries read it
  // exactly or hot). Cold reads of a full block then come from the arena, never encoded per query.
  void seal_layer(int32_t layer, const BlockRef* block_table, int64_t begin, int64_t end);
  // Whether the arena holds `layer` of pool block `block` in the arena type (finalized, or sealed).
  bool arena_valid(int32_t block, int32_t layer) const {
    return staging_of_[block] < 0 || sealed_upto_[block] > layer;
  }

  // Blocks [0, n) of a sequence with `num_positions` computed positions that no query at a later
  // position reads exactly or hot.
  int64_t finalized_blocks(int64_t num_positions) const override;
  // Blocks [0, n) read hot by every later query (sink tokens; 0 without a hot window).
  int64_t sink_blocks() const override { return sink_blocks_; }
  // After a forward step: frees the staging copies of the sequence's newly finalized blocks
  // (encoding any layer not sealed yet). `block_table` covers at least finalized_blocks(num_positions) blocks.
  void commit(const BlockRef* block_table, int64_t num_positions);
  // A block about to be rewritten from some slot on (a truncated sequence): its layers count as
  // unsealed again so the next completion re-encodes them. False when a staged cache no longer
  // holds the block's exact copy (it was finalized, or moved to the far tier), which makes the
  // rewrite impossible.
  bool reopen_block(BlockRef block);
  bool reopen_block(int32_t block) override { return reopen_block(BlockRef::pool(block)); }
  // Copy-on-write helper: copies block `src`'s arena and staging contents into `dst`.
  void copy_block(int32_t src, int32_t dst) override;

  // Blocks needed to hold `num_tokens` positions.
  int32_t blocks_for(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + cfg_.block_tokens - 1) / cfg_.block_tokens);
  }

  // Prefix caching with a hot window. A cached block's hot form exists only in its staging copy
  // (the arena holds the cold form), and a sequence that attaches cached blocks reads the newest
  // of them hot. So staging copies are kept ("retained") when their owner no longer needs them —
  // every block at finalization, cacheable ones when released — at most `max_blocks` of them, the
  // least recently retained dropped first (a released block that is not cacheable drops its own). Dropping is always safe: a sequence that
  // needs a cached block hot attaches a private copy (copy_block), never the shared one.
  void set_hot_retention(int32_t max_blocks);
  int32_t max_retained() const { return max_retained_; }
  int32_t num_retained() const { return static_cast<int32_t>(retained_lru_.size()); }
  // Whether `block`'s exact (hence hot) form is at hand: a staging copy of a full, sealed block.
  bool hot_form_available(int32_t block) const override {
    return staging_of_[block] >= 0 && sealed_upto_[block] == cfg_.num_layers;
  }

  KvMemory memory() const;
  int32_t num_staging_slots() const { return static_cast<int32_t>(staging_.size()); }
  int32_t num_staging_in_use() const { return static_cast<int32_t>(staging_.size() - staging_free_.size()); }

 private:
  uint8_t* plane_mut(int32_t block, int32_t layer, int32_t stream) {
    return const_cast<uint8_t*>(static_cast<const KvCache*>(this)->plane(block, layer, stream));
  }
  // Encodes every head of (block, layer, stream) from staging into the arena.
  void encode_arena_plane(int32_t block, int32_t layer, int32_t stream, float* tmp);
  uint8_t* staging_plane(int32_t slot, int32_t layer, int32_t stream) const {
    return staging_[slot].get() + (2 * static_cast<uint64_t>(layer) + stream) * staging_plane_bytes_;
  }
  void release_staging(int32_t block);
  void on_unreferenced(int32_t block);
  void retain(int32_t block);

  KvCacheConfig cfg_;
  KvPrecision prec_;
  KvTypePair arena_types_;
  bool staged_ = false;
  int64_t sink_blocks_ = 0;
  kernels::KvCodec exact_codec_;
  BlockPool pool_;
  uint64_t plane_bytes_[2] = {0, 0};  // K, V
  uint64_t exact_row_bytes_ = 0;
  uint64_t staging_plane_bytes_ = 0;
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, FreeDeleter> arena_;  // [num_blocks][num_layers][K, V] planes
  // Staging copies: slot buffers of [num_layers][K, V][num_kv_heads][block_tokens][head_dim] in
  // exact_codec(), grown on demand (a step needs a few per sequence) and reused.
  std::vector<std::unique_ptr<uint8_t[]>> staging_;
  std::vector<int32_t> staging_free_;
  std::vector<int32_t> staging_of_;  // per block: its staging slot or -1
  std::vector<int32_t> sealed_upto_;  // per staged block: layers [0, n) already encoded into the arena
  int32_t staging_high_water_ = 0;
  // Hot retention (set_hot_retention): retained blocks, least recently retained first.
  int32_t max_retained_ = 0;
  std::vector<uint8_t> retained_;  // per block
  std::list<int32_t> retained_lru_;
  FarTier* far_ = nullptr;
  std::vector<std::list<int32_t>::iterator> retained_pos_;  // per block, valid while retained
};

}  // namespace hz
