// Causal attention of the query heads that share one KV head (a GQA group) over a sequence's paged
// KV cache, tiled with an online softmax; K/V rows of every cache type are read by the fused
// kernels of kernels/attn_kernels.h (dequantized in registers), once per group.
//
// Numerics are defined by positions alone (chunk-, batch-, thread- and split-invariance): keys are
// visited in tiles of kTileTokens aligned to absolute positions; the tiles of one super-segment
// (kSuperTokens positions, aligned) run one online softmax from an empty state; super-segment
// partials are merged in position order. That tree is the same whether one task walks all
// super-segments or several threads compute them (flash-decoding, model/attention_runner.h). Tiles
// are read through a KvReadTable (kv/kv_read_table.h), which gives each query the form of each
// block the KV position rule says; attention does not know where or in which form a block is.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_read_table.h"

namespace hz {

constexpr int32_t kTileTokens = 16;
constexpr int32_t kSuperTokens = 512;

// A partial softmax state of `heads` heads, as floats: [heads] max, [heads] sum, [heads][head_dim]
// weighted sum of values.
inline int64_t attn_partial_floats(int32_t heads, int32_t head_dim) {
  return static_cast<int64_t>(heads) * (head_dim + 2);
}

// Per-thread working memory: O(block), independent of the depth.
struct AttnScratch {
  std::vector<float> q;         // [heads][head_dim] scaled queries
  std::vector<float> scores;    // [heads][kTileTokens]
  std::vector<float> part;      // one partial
  std::vector<float> total;     // the running merge of partials (unsplit path)
  // Query blocks (attend_group_block): per query its total and its partial, and a first-tile flag.
  std::vector<float> block_total;
  std::vector<float> block_part;
  std::vector<uint8_t> first;
  std::vector<float> qblock;    // [queries][heads][head_dim] scaled queries of a block
  std::vector<int64_t> pos;     // their positions
  void prepare(int32_t head_dim, int32_t heads);
};

// Key range of a query at `pos`: [first, pos + 1), first = pos - window + 1 for a sliding window.
inline int64_t attn_first_key(int64_t pos, int64_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

// The partial over keys [key_begin, key_end) (within one super-segment) of `heads` query heads
// q[heads][head_dim] (already scaled by 1/sqrt(head_dim)) that read kv head `kv_head` of table `t`,
// for queries at position `query_pos`. Writes `part` (attn_partial_floats); the range must not be empty.
void attend_super(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int64_t query_pos,
                  int64_t key_begin, int64_t key_end, float* part, AttnScratch* scratch);

// total = merge(total, part): the softmax state over both key sets.
void merge_attn_partial(float* total, const float* part, int32_t heads, int32_t head_dim);
// out[h][head_dim] = the normalised attention output of each head.
void finish_attn_partial(const float* total, int32_t heads, int32_t head_dim, float* out);

// Full causal attention of `heads` query heads (q[heads][head_dim], scaled) sharing kv head
// `kv_head`, for queries at `pos`: out[heads][head_dim] over keys [attn_first_key(pos, window), pos].
// Walks the super-segments in order (the unsplit path).
void attend_group(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int64_t pos, float* out,
                  AttnScratch* scratch, int64_t window = 0);

// attend_group for `nq` queries of one sequence at ascending positions `pos` (full causal, no
// window), q[nq][heads][head_dim]: each key tile is read once for all of them (prefill). Bit-
// identical to attend_group per query; query i's output goes to out + i * out_stride.
void attend_group_block(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int32_t nq,
                        const int64_t* pos, float* out, int64_t out_stride, AttnScratch* scratch);
// One super-segment [key_begin, key_begin + kSuperTokens) of attend_group_block; `parts` holds one
// partial per query, written for each query that reaches the segment.
void attend_super_block(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int32_t nq,
                        const int64_t* pos, int64_t key_begin, float* parts, AttnScratch* sc);

// One query head: attend_group with heads = 1.
void attend(const KvReadTable& t, int32_t kv_head, const float* q, int64_t pos, float* out, AttnScratch* scratch,
            int64_t window = 0);

// Tests and benches: the same over `kv` and a block table, building a one-query read table of
// layer `layer` per call (slow; the engine builds a step's tables once per layer).
void attend_group(const KvCache& kv, const BlockRef* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int32_t heads, int64_t pos, float* out, AttnScratch* scratch, int64_t window = 0);
void attend(const KvCache& kv, const BlockRef* block_table, int32_t layer, int32_t kv_head, const float* q, int64_t pos,
            float* out, AttnScratch* scratch, int64_t window = 0);

}  // namespace hz
