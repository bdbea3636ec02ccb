// Causal attention of one query head over a sequence's paged KV cache, tiled with an online
// softmax: the score row is never materialised beyond one tile.
//
// Numerics are defined by positions alone (chunk- and batch-invariance): keys are visited in tiles
// of kTileTokens aligned to absolute positions, tiles are grouped into segments of kSegmentTokens
// whose partial softmax states are merged in segment order. Whoever computes a segment (one thread
// or another, this step or a later one) produces the same bits.
#pragma once

#include <cstdint>

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

// Attends keys [key_begin, key_end) of kv head `kv_head` in `layer` for query `q` (already scaled
// by 1/sqrt(head_dim)); updates `st` in place.
void attend_range(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int64_t key_begin, int64_t key_end, AttnPartial* st, float* scratch);

// Merges `b` into `a` (a's state becomes the softmax over both key sets).
void merge_partials(AttnPartial* a, const AttnPartial& b, int32_t head_dim);

// Full causal attention for a query at `pos`: out[head_dim] = softmax(q K^T) V over keys [0, pos],
// or over the last `window` keys [pos - window + 1, pos] when window > 0 (sliding-window
// attention, ModelConfig::sliding_window). `scratch` needs 2 * head_dim + kTileTokens floats.
void attend(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q, int64_t pos,
            float* out, float* scratch, int64_t window = 0);

}  // namespace hz
