#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"

namespace hz {

void attend_range(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int64_t key_begin, int64_t key_end, AttnPartial* st, float* scratch) {
  const KvCacheConfig& c = kv.config();
  const int32_t hd = c.head_dim;
  const int32_t bt = c.block_tokens;
  const uint64_t rb = kv.row_bytes();
  const bool f16 = c.dtype == DType::kF16;
  float* scores = scratch;  // [kTileTokens]
  for (int64_t t0 = key_begin; t0 < key_end; t0 += kTileTokens) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(kTileTokens, key_end - t0));
    const int32_t block = block_table[t0 / bt];
    const int32_t slot = static_cast<int32_t>(t0 % bt);
    const uint8_t* kp = kv.k_data(block, layer) + (static_cast<uint64_t>(kv_head) * bt + slot) * rb;
    const uint8_t* vp = kv.v_data(block, layer) + (static_cast<uint64_t>(kv_head) * bt + slot) * rb;
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int32_t j = 0; j < n; ++j) {
      const uint8_t* kr = kp + j * rb;
      scores[j] = f16 ? kernels::dot_f32_f16(q, reinterpret_cast<const uint16_t*>(kr), hd)
                      : kernels::dot_f32(q, reinterpret_cast<const float*>(kr), hd);
      tile_max = std::max(tile_max, scores[j]);
    }
    float new_max = st->empty ? tile_max : std::max(st->max, tile_max);
    if (!st->empty) {
      float corr = std::exp(st->max - new_max);
      st->sum *= corr;
      kernels::scale(st->acc, corr, hd);
    } else {
      std::memset(st->acc, 0, sizeof(float) * hd);
      st->sum = 0;
      st->empty = false;
    }
    st->max = new_max;
    for (int32_t j = 0; j < n; ++j) {
      float p = std::exp(scores[j] - new_max);
      st->sum += p;
      const uint8_t* vr = vp + j * rb;
      if (f16) {
        kernels::axpy_f16(st->acc, p, reinterpret_cast<const uint16_t*>(vr), hd);
      } else {
        kernels::axpy(st->acc, p, reinterpret_cast<const float*>(vr), hd);
      }
    }
  }
}

void merge_partials(AttnPartial* a, const AttnPartial& b, int32_t head_dim) {
  if (b.empty) return;
  if (a->empty) {
    a->max = b.max;
    a->sum = b.sum;
    std::memcpy(a->acc, b.acc, sizeof(float) * head_dim);
    a->empty = false;
    return;
  }
  float m = std::max(a->max, b.max);
  float ca = std::exp(a->max - m);
  float cb = std::exp(b.max - m);
  a->sum = a->sum * ca + b.sum * cb;
  kernels::scale(a->acc, ca, head_dim);
  kernels::axpy(a->acc, cb, b.acc, head_dim);
  a->max = m;
}

void attend(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q, int64_t pos,
            float* out, float* scratch, int64_t window) {
  const int32_t hd = kv.config().head_dim;
  AttnPartial total;
  total.acc = out;
  AttnPartial seg;
  seg.acc = scratch;
  float* tile_scratch = scratch + hd;
  const int64_t num_keys = pos + 1;
  // Sliding window: the first key depends on pos alone, segments stay aligned to absolute positions.
  const int64_t first_key = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  for (int64_t s0 = first_key / kSegmentTokens * kSegmentTokens; s0 < num_keys; s0 += kSegmentTokens) {
    seg.empty = true;
    int64_t lo = std::max(s0, first_key);
    const int64_t hi = std::min<int64_t>(num_keys, s0 + kSegmentTokens);
    if (lo % kTileTokens != 0) {
      // attend_range's tiles must not cross a block: finish the window's first, partial tile alone.
      const int64_t tile_end = std::min(hi, (lo / kTileTokens + 1) * kTileTokens);
      attend_range(kv, block_table, layer, kv_head, q, lo, tile_end, &seg, tile_scratch);
      lo = tile_end;
    }
    if (lo < hi) attend_range(kv, block_table, layer, kv_head, q, lo, hi, &seg, tile_scratch);
    merge_partials(&total, seg, hd);
  }
  kernels::scale(out, 1.0f / total.sum, hd);
}

}  // namespace hz
