#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "kernels/kernels.h"

namespace hz {

void AttnScratch::prepare(const KvCache& kv) {
  const KvCacheConfig& c = kv.config();
  const size_t hd = static_cast<size_t>(c.head_dim);
  if (seg_acc.size() < hd) seg_acc.resize(hd);
  if (scores.size() < static_cast<size_t>(kTileTokens)) scores.resize(kTileTokens);
  if (k_tile.size() < kTileTokens * hd) {
    k_tile.resize(kTileTokens * hd);
    v_tile.resize(kTileTokens * hd);
  }
  if (kv.staged() && src.size() < c.block_tokens * hd) {
    src.resize(c.block_tokens * hd);
    uint64_t most = 0;
    for (KvType t : all_kv_types()) most = std::max(most, kv.plane_bytes_for(kv_codec(t)));
    enc_k.resize(most);
    enc_v.resize(most);
  }
}

namespace {

// Scores and value accumulation of one tile whose keys/values are given as rows in `codec`-exact
// form (f16 or f32 rows at stride hd).
float exact_scores(kernels::KvCodec codec, const float* q, const uint8_t* kp, uint64_t rb, int32_t n, int32_t hd,
                   float* scores) {
  float tile_max = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < n; ++j) {
    const uint8_t* kr = kp + j * rb;
    scores[j] = codec == kernels::KvCodec::kF16 ? kernels::dot_f32_f16(q, reinterpret_cast<const uint16_t*>(kr), hd)
                                                : kernels::dot_f32(q, reinterpret_cast<const float*>(kr), hd);
    tile_max = std::max(tile_max, scores[j]);
  }
  return tile_max;
}

void exact_values(kernels::KvCodec codec, const float* scores, float new_max, const uint8_t* vp, uint64_t rb, int32_t n,
                  int32_t hd, AttnPartial* st) {
  for (int32_t j = 0; j < n; ++j) {
    float p = std::exp(scores[j] - new_max);
    st->sum += p;
    const uint8_t* vr = vp + j * rb;
    if (codec == kernels::KvCodec::kF16) {
      kernels::axpy_f16(st->acc, p, reinterpret_cast<const uint16_t*>(vr), hd);
    } else {
      kernels::axpy(st->acc, p, reinterpret_cast<const float*>(vr), hd);
    }
  }
}

// Rescales the running state for a tile whose max score is `tile_max`; returns the new max.
float open_tile(AttnPartial* st, float tile_max, int32_t hd) {
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
  return new_max;
}

}  // namespace

void attend_range(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int64_t query_pos, int64_t key_begin, int64_t key_end, AttnPartial* st, AttnScratch* sc) {
  const KvCacheConfig& c = kv.config();
  const int32_t hd = c.head_dim;
  const int32_t bt = c.block_tokens;
  const uint64_t rb = kv.exact_row_bytes();
  const kernels::KvCodec exact = kv.exact_codec();
  float* scores = sc->scores.data();
  // Tiles are aligned to absolute multiples of kTileTokens (a window's first tile may be partial),
  // so a tile never crosses a block boundary and its bounds depend on positions only.
  int32_t n = 0;
  for (int64_t t0 = key_begin; t0 < key_end; t0 += n) {
    n = static_cast<int32_t>(std::min<int64_t>(kTileTokens - t0 % kTileTokens, key_end - t0));
    const int64_t bi = t0 / bt;
    const int32_t block = block_table[bi];
    const int32_t slot = static_cast<int32_t>(t0 % bt);
    const KvRead form = kv.staged() ? kv.read_form(query_pos, bi) : KvRead::kExact;
    const KvPrecision& pr = kv.precision();
    if (form == KvRead::kExact || (form == KvRead::kHot && kv_codec(pr.hot) == exact)) {
      const uint8_t* kplane = kv.exact_plane(block, layer, 0);
      const uint8_t* vplane = kv.exact_plane(block, layer, 1);
      HZ_DCHECK(kplane != nullptr);
      const uint64_t off = (static_cast<uint64_t>(kv_head) * bt + slot) * rb;
      float new_max = open_tile(st, exact_scores(exact, q, kplane + off, rb, n, hd, scores), hd);
      exact_values(exact, scores, new_max, vplane + off, rb, n, hd, st);
      continue;
    }
    // Encoded form: from the arena when the block is finalized, else encoded on the fly from its
    // staging copy by the same encoder commit() uses (same bytes either way).
    const kernels::KvCodec codec = kv_codec(form == KvRead::kHot ? pr.hot : kv.arena_type());
    const uint8_t* kplane;
    const uint8_t* vplane;
    if (form == KvRead::kCold && kv.arena_valid(block, layer)) {
      kplane = kv.plane(block, layer, 0);
      vplane = kv.plane(block, layer, 1);
    } else {
      if (sc->enc_block != block || sc->enc_codec != static_cast<int32_t>(codec)) {
        kv.encode_head(codec, block, layer, 0, kv_head, sc->src.data(), sc->enc_k.data());
        kv.encode_head(codec, block, layer, 1, kv_head, sc->src.data(), sc->enc_v.data());
        sc->enc_block = block;
        sc->enc_codec = static_cast<int32_t>(codec);
      }
      kplane = sc->enc_k.data();
      vplane = sc->enc_v.data();
    }
    const uint64_t reb = kernels::kv_row_elem_bytes(codec, hd);
    const uint64_t rsb = kernels::kv_row_scale_bytes(codec, hd);
    const uint64_t eoff = kv.head_elem_offset(codec, kv_head) + slot * reb;
    const uint64_t soff = kv.head_scale_offset(codec, kv_head) + slot * rsb;  // fp8: rsb 0, the head's scale
    kernels::decode_kv_rows(codec, kplane + eoff, kplane + soff, n, hd, sc->k_tile.data());
    kernels::decode_kv_rows(codec, vplane + eoff, vplane + soff, n, hd, sc->v_tile.data());
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int32_t j = 0; j < n; ++j) {
      scores[j] = kernels::dot_f32(q, sc->k_tile.data() + static_cast<size_t>(j) * hd, hd);
      tile_max = std::max(tile_max, scores[j]);
    }
    float new_max = open_tile(st, tile_max, hd);
    for (int32_t j = 0; j < n; ++j) {
      float p = std::exp(scores[j] - new_max);
      st->sum += p;
      kernels::axpy(st->acc, p, sc->v_tile.data() + static_cast<size_t>(j) * hd, hd);
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
            float* out, AttnScratch* scratch, int64_t window) {
  const int32_t hd = kv.config().head_dim;
  scratch->prepare(kv);
  scratch->enc_block = -1;
  AttnPartial total;
  total.acc = out;
  AttnPartial seg;
  seg.acc = scratch->seg_acc.data();
  const int64_t num_keys = pos + 1;
  // Sliding window: the first key depends on pos alone, segments stay aligned to absolute positions.
  const int64_t first_key = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  for (int64_t s0 = first_key / kSegmentTokens * kSegmentTokens; s0 < num_keys; s0 += kSegmentTokens) {
    seg.empty = true;
    attend_range(kv, block_table, layer, kv_head, q, pos, std::max(s0, first_key),
                 std::min<int64_t>(num_keys, s0 + kSegmentTokens), &seg, scratch);
    merge_partials(&total, seg, hd);
  }
  kernels::scale(out, 1.0f / total.sum, hd);
}

}  // namespace hz
