// Causal attention of one query head over a sequence's paged KV cache, tiled with an online
// softmax: the score row is never materialised beyond one tile, and compact KV types are decoded
// one tile (kTileTokens rows) at a time inside the loop, never into a full f32 copy.
//
// Numerics are defined by positions alone (chunk- and batch-invariance): keys are visited in tiles
// of kTileTokens aligned to absolute positions, tiles are grouped into segments of kSegmentTokens
// whose partial softmax states are merged in segment order, and each block is read in the form the
// KV position rule gives for the query's position (kv/kv_cache.h). Whoever computes a segment (one
// thread or another, this step or a later one) produces the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"

namespace hz {

constexpr int32_t kTileTokens = 16;
constexpr int32_t kSegmentTokens = 256;

// Online-softmax state of a partial attention: max score, sum of exp, weighted sum of values.
struct AttnPartial {
  float max = 0;
  float sum = 0;
  float* acc = nullptr;  // [head_dim]
  bool empty = true;
};

// Per-thread working memory of attend(): O(block), independent of the depth.
struct AttnScratch {
  std::vector<float> seg_acc;   // [head_dim]
  std::vector<float> scores;    // [kTileTokens]
  std::vector<float> k_tile;    // [kTileTokens][head_dim] decoded keys
  std::vector<float> v_tile;    // [kTileTokens][head_dim] decoded values
  std::vector<float> src;       // [block_tokens][head_dim] staging rows as f32 (on-the-fly encodes)
  std::vector<uint8_t> enc_k;   // one plane in the codec being read on the fly
  std::vector<uint8_t> enc_v;
  // Which (block, layer, head, codec) enc_k / enc_v hold; reset by attend().
  int64_t enc_block = -1;
  int32_t enc_codec = -1;
  void prepare(const KvCache& kv);
};

// Attends keys [key_begin, key_end) of kv head `kv_head` in `layer` for query `q` at position
// `query_pos` (q already scaled by 1/sqrt(head_dim)); updates `st` in place.
void attend_range(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int64_t query_pos, int64_t key_begin, int64_t key_end, AttnPartial* st, AttnScratch* scratch);

// Merges `b` into `a` (a's state becomes the softmax over both key sets).
void merge_partials(AttnPartial* a, const AttnPartial& b, int32_t head_dim);

// Full causal attention for a query at `pos`: out[head_dim] = softmax(q K^T) V over keys [0, pos],
// or over the last `window` keys [pos - window + 1, pos] when window > 0 (sliding-window
// attention, ModelConfig::sliding_window).
void attend(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q, int64_t pos,
            float* out, AttnScratch* scratch, int64_t window = 0);

}  // namespace hz
