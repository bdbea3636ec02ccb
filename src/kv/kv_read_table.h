// KvReadTable: what attention reads of one sequence's KV cache in one engine step — per block a
// descriptor saying where its K and V planes are for the current layer and in which codec, in the
// form the position rule (kv/kv_cache.h) gives each query. kv/ builds it: staged blocks read in a
// compact form are encoded here, far blocks have their checksums verified here, so attention
// (model/attention.h) reads tiles through tile() and never learns which tier or form a block is in.
// KvReader builds the tables of one step's sequences, layer by layer.
//
// The host twin of the device attention table (device::DeviceKvBlock, device/kv_block_desc.h):
// the same fields — K and V elements, K and V scales, codec — as pointers into this layer's planes
// instead of byte offsets into a device arena. A device backend builds that table the same way.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "kv/block_ref.h"
#include "kv/kv_cache.h"

namespace hz {

// One block of one layer as a reader sees it. Planes as in kv/kv_layout.h: elements
// [num_kv_heads][block_tokens][row elem bytes], then scales ([num_kv_heads][block_tokens][row scale
// bytes]; fp8: [num_kv_heads] f32). The pointers are head 0, slot 0; scales are null for types
// without them (f32, f16, bf16). K and V may be in different codecs (separate K and V types).
struct KvBlockDesc {
  const uint8_t* k_elems = nullptr;
  const uint8_t* v_elems = nullptr;
  const uint8_t* k_scales = nullptr;
  const uint8_t* v_scales = nullptr;
  kernels::KvCodec k_codec = kernels::KvCodec::kF16;
  kernels::KvCodec v_codec = kernels::KvCodec::kF16;
};

// The rows of one tile (consecutive positions inside one block) of one KV head.
struct KvTile {
  kernels::KvCodec k_codec = kernels::KvCodec::kF16;
  kernels::KvCodec v_codec = kernels::KvCodec::kF16;
  const uint8_t* k = nullptr;   // first row's elements
  const uint8_t* v = nullptr;
  const uint8_t* ks = nullptr;  // first row's scales (fp8: the head's scale); null without scales
  const uint8_t* vs = nullptr;
  uint64_t bytes = 0;           // element bytes of the tile's K rows (for prefetching)
  uint64_t v_bytes = 0;         // and of its V rows
  uint64_t ks_bytes = 0;        // scale bytes of the K rows (for prefetching; 0 without scales)
  uint64_t vs_bytes = 0;        // and of the V rows
};

class KvReadTable {
 public:
  KvReadTable() = default;
  KvReadTable(const KvReadTable&) = delete;
  KvReadTable& operator=(const KvReadTable&) = delete;
  KvReadTable(KvReadTable&&) = default;
  KvReadTable& operator=(KvReadTable&&) = default;

  // A step of a sequence whose block table `blocks` covers its queries at positions [q_begin,
  // q_end) (may be empty); keys before attn_first_key(q_begin, window) are not read (a sliding window; 0: none).
  // `kv` and `blocks` must outlive the table's use in this step.
  void reset(const KvCache& kv, const BlockRef* blocks, int64_t q_begin, int64_t q_end, int64_t window = 0);
  // The descriptors of `layer`, after this step's K/V rows of the layer were written and sealed:
  // encodes what must be read in a form the cache does not hold, verifies far blocks (once per
  // far tier pass). `pool` spreads that work; null: on the calling thread.
  void bind_layer(int32_t layer, ThreadPool* pool = nullptr);

  int32_t head_dim() const { return head_dim_; }
  int32_t block_tokens() const { return block_tokens_; }

  // What a query at `query_pos` reads of block `block_idx` (bound layer).
  const KvBlockDesc& block(int64_t query_pos, int64_t block_idx) const {
    if (!staged_) return cold_[block_idx];
    switch (kv_->read_form(query_pos, block_idx)) {
      case KvRead::kExact:
        return near_[2 * (block_idx - near_begin_)];
      case KvRead::kHot:
        if (block_idx < near_begin_) return sinks_[block_idx];  // a sink block far behind the queries
        return near_[2 * (block_idx - near_begin_) + 1];
      case KvRead::kCold:
        break;
    }
    return cold_[block_idx];
  }
  // The `n` rows of KV head `head` from position `t0` (one block) as a query at `query_pos` reads them.
  KvTile tile(int32_t head, int64_t query_pos, int64_t t0, int32_t n) const {
    const KvBlockDesc& d = block(query_pos, t0 / block_tokens_);
    const Strides& sk = strides_[static_cast<size_t>(d.k_codec)];
    const Strides& sv = strides_[static_cast<size_t>(d.v_codec)];
    const uint64_t slot = static_cast<uint64_t>(t0 % block_tokens_), h = static_cast<uint64_t>(head);
    KvTile t;
    t.k_codec = d.k_codec;
    t.v_codec = d.v_codec;
    t.k = d.k_elems + h * sk.head_elems + slot * sk.row_elems;
    t.v = d.v_elems + h * sv.head_elems + slot * sv.row_elems;
    if (d.k_scales != nullptr) {
      t.ks = d.k_scales + h * sk.head_scales + slot * sk.row_scales;
      t.ks_bytes = std::max<uint64_t>(1, static_cast<uint64_t>(n) * sk.row_scales);
    }
    if (d.v_scales != nullptr) {
      t.vs = d.v_scales + h * sv.head_scales + slot * sv.row_scales;
      t.vs_bytes = std::max<uint64_t>(1, static_cast<uint64_t>(n) * sv.row_scales);
    }
    t.bytes = static_cast<uint64_t>(n) * sk.row_elems;
    t.v_bytes = static_cast<uint64_t>(n) * sv.row_elems;
    return t;
  }

 private:
  friend class KvReader;
  // One unit of bind work: an encode of one block (both streams, every head) or a far block's check.
  struct Job {
    int64_t block_idx;
    KvBlockDesc* desc;   // encode target (its planes point into enc_); null: a far check
    KvTypePair codecs;   // K and V codecs of the encode
  };
  struct Strides {
    uint64_t row_elems = 0, head_elems = 0, row_scales = 0, head_scales = 0;
    uint64_t scales = 0;  // offset of the scales in a plane
  };
  // Fills the descriptors of `layer` and lists the encodes and checks in jobs_.
  void plan_layer(int32_t layer);
  KvBlockDesc stored(BlockRef b, int32_t layer, bool exact) const;
  void add_encode(int64_t block_idx, KvBlockDesc* d, KvTypePair c);
  // `d` = the hot form of block `block_idx`: its staging copy, or an encode of it in the hot type.
  void add_hot(int64_t block_idx, KvBlockDesc* d, int32_t layer);
  void run_job(const Job& j, float* tmp) const;

  const KvCache* kv_ = nullptr;
  const BlockRef* blocks_ = nullptr;
  int32_t head_dim_ = 0, block_tokens_ = 0, layer_ = -1;
  bool staged_ = false;
  int64_t first_block_ = 0;   // blocks before it are not read (window)
  int64_t cold_end_ = 0;      // blocks [first_block_, cold_end_) are read cold by some query
  int64_t near_begin_ = 0;    // blocks [near_begin_, near_end_) are read exactly or hot by some query
  int64_t near_end_ = 0;
  int64_t exact_begin_ = 0;   // blocks holding a query
  int64_t q_begin_ = 0, q_end_ = 0;
  std::array<Strides, kNumKvTypes> strides_{};   // per codec
  std::vector<KvBlockDesc> cold_;      // [blocks]: the cold form (unstaged caches: the only form)
  std::vector<KvBlockDesc> near_;      // [near blocks][exact, hot]
  int64_t sink_blocks_ = 0;            // blocks every later query reads hot (KvCache::sink_blocks)
  std::vector<KvBlockDesc> sinks_;     // [blocks before near_begin_]: the hot form of sink blocks
  std::vector<Job> jobs_;
  std::vector<uint8_t> enc_;           // encoded planes: [encodes][K, V] planes of enc_plane_bytes_ each
  uint64_t enc_plane_bytes_ = 0;
  int32_t num_encodes_ = 0;
};

// The read tables of one step's sequences. Owns the far tier's pass (one per layer: each far
// block checked once, pages unmapped after the layer) so the reader of the tables need not.
class KvReader {
 public:
  // One table per sequence; `tables()` stay valid until the next begin_step().
  void begin_step(const KvCache& kv, size_t num_seqs);
  KvReadTable& table(size_t i) { return tables_[i]; }
  const KvReadTable& table(size_t i) const { return tables_[i]; }
  // Binds every table to `layer` (their encodes and checks spread over `pool` together).
  void bind_layer(int32_t layer, ThreadPool* pool);
  // After the layer's attention: releases what was read of the far tier for it.
  void end_layer(int32_t layer);

 private:
  const KvCache* kv_ = nullptr;
  std::vector<KvReadTable> tables_;
  size_t num_tables_ = 0;
  bool far_pass_ = false;
  std::vector<std::pair<KvReadTable*, const KvReadTable::Job*>> jobs_;
  std::vector<std::vector<float>> tmp_;  // per thread: one head's rows as f32
};

}  // namespace hz
