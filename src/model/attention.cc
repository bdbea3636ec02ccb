#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/prefetch.h"
#include "kernels/attn_kernels.h"
#include "kernels/kernels.h"

namespace hz {

void AttnScratch::prepare(int32_t head_dim, int32_t heads) {
  const size_t hd = static_cast<size_t>(head_dim);
  const size_t pf = static_cast<size_t>(attn_partial_floats(heads, head_dim));
  if (q.size() < heads * hd) q.resize(heads * hd);
  if (scores.size() < static_cast<size_t>(heads) * kTileTokens) scores.resize(static_cast<size_t>(heads) * kTileTokens);
  if (part.size() < pf) part.resize(pf);
  if (total.size() < pf) total.resize(pf);
}

namespace {

// Consecutive tiles live in different blocks (far apart, in other pages), which the hardware
// prefetchers do not follow: a tile's rows and scales are requested kPrefetchTiles tiles before
// it is computed. (base/prefetch.h: prefetches the compiler cannot drop.)
void prefetch(const KvTile& t) {
  prefetch_range(t.k, t.bytes);
  prefetch_range(t.v, t.v_bytes);
  prefetch_range(t.ks, t.ks_bytes);  // 0 bytes without scales
  prefetch_range(t.vs, t.vs_bytes);
}

int32_t tile_len(int64_t t0, int64_t key_end) {
  return static_cast<int32_t>(std::min<int64_t>(kTileTokens - t0 % kTileTokens, key_end - t0));
}

// How far ahead attend_super requests tiles. One tile's work (about 0.3 us at depth) is shorter
// than a memory round trip on the development machines, so one tile ahead left the loads waiting.
constexpr int kPrefetchTiles = 3;

// Requests the tiles of [key_begin, key_end) one at a time, in order.
class TilePrefetcher {
 public:
  TilePrefetcher(const KvReadTable& t, int32_t kv_head, int64_t query_pos, int64_t key_begin, int64_t key_end)
      : t_(t), kv_head_(kv_head), query_pos_(query_pos), next_(key_begin), end_(key_end) {}
  void advance() {
    if (next_ >= end_) return;
    const int32_t n = tile_len(next_, end_);
    prefetch(t_.tile(kv_head_, query_pos_, next_, n));
    next_ += n;
  }

 private:
  const KvReadTable& t_;
  int32_t kv_head_;
  int64_t query_pos_, next_, end_;
};

// One tile of the online softmax: the scores of `heads` queries against the tile's `n` keys, then
// the running state in `part` (max, sum, weighted values) updated — the one sequence of operations
// every path applies, so a query's result depends on positions only.
void tile_update(int32_t hd, const float* q, int32_t heads, const KvTile& cur, int32_t n, float* part, bool first,
                 AttnScratch* sc) {
  float* scores = sc->scores.data();
  kernels::kv_scores(cur.k_codec, q, heads, cur.k, cur.ks, n, hd, scores);
  kernels::softmax_tile(scores, heads, n, hd, first, part);  // scores become probabilities
  kernels::kv_accumulate(cur.v_codec, scores, heads, cur.v, cur.vs, n, hd, part + 2 * heads);
}

}  // namespace

void attend_super(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int64_t query_pos,
                  int64_t key_begin, int64_t key_end, float* part, AttnScratch* sc) {
  HZ_DCHECK(key_begin < key_end);
  HZ_DCHECK(key_begin / kSuperTokens == (key_end - 1) / kSuperTokens);
  const int32_t hd = t.head_dim();
  bool first = true;
  TilePrefetcher ahead(t, kv_head, query_pos, key_begin, key_end);
  for (int i = 0; i < kPrefetchTiles; ++i) ahead.advance();
  // Tiles are aligned to absolute multiples of kTileTokens (a window's first tile may be partial),
  // so a tile never crosses a block boundary and its bounds depend on positions only.
  for (int64_t t0 = key_begin; t0 < key_end;) {
    const int32_t n = tile_len(t0, key_end);
    ahead.advance();
    tile_update(hd, q, heads, t.tile(kv_head, query_pos, t0, n), n, part, first, sc);
    first = false;
    t0 += n;
  }
}

void attend_super_block(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int32_t nq,
                        const int64_t* pos, int64_t key_begin, float* parts, AttnScratch* sc) {
  HZ_DCHECK(key_begin % kSuperTokens == 0);
  const int32_t hd = t.head_dim();
  const int64_t qf = static_cast<int64_t>(heads) * hd;
  const int64_t pf = attn_partial_floats(heads, hd);
  const int64_t seg_end = key_begin + kSuperTokens;
  const int64_t last = std::min(seg_end, pos[nq - 1] + 1);
  if (sc->first.size() < static_cast<size_t>(nq)) sc->first.resize(nq);
  std::fill(sc->first.begin(), sc->first.begin() + nq, uint8_t{1});
  // Tile by tile, every query of the block that reaches it: the tile's K/V rows are read from
  // memory once and stay in L1 for the others. Per query the tiles, their lengths and the
  // operations are those of attend_super.
  for (int64_t t0 = key_begin, next; t0 < last; t0 = next) {
    next = t0 + kTileTokens - t0 % kTileTokens;
    if (next < last) prefetch(t.tile(kv_head, pos[nq - 1], next, tile_len(next, last)));  // the last query reads every tile
    for (int32_t i = 0; i < nq; ++i) {
      const int64_t end = std::min(seg_end, pos[i] + 1);
      if (t0 >= end) continue;
      const int32_t n = tile_len(t0, end);
      tile_update(hd, q + i * qf, heads, t.tile(kv_head, pos[i], t0, n), n, parts + i * pf, sc->first[i] != 0, sc);
      sc->first[i] = 0;
    }
  }
}

void attend_group_block(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int32_t nq,
                        const int64_t* pos, float* out, int64_t out_stride, AttnScratch* scratch) {
  const int32_t hd = t.head_dim();
  const int64_t pf = attn_partial_floats(heads, hd);
  scratch->prepare(hd, heads);
  if (scratch->block_total.size() < static_cast<size_t>(nq * pf)) {
    scratch->block_total.resize(nq * pf);
    scratch->block_part.resize(nq * pf);
  }
  float* totals = scratch->block_total.data();
  float* parts = scratch->block_part.data();
  // As attend_group for each query: super-segment 0 into its total, later ones merged in order.
  for (int64_t s = 0; s * kSuperTokens <= pos[nq - 1]; ++s) {
    const int64_t k0 = s * kSuperTokens;
    int32_t i0 = 0;  // queries before the segment do not read it
    while (pos[i0] < k0) ++i0;
    if (s == 0) {
      attend_super_block(t, kv_head, q, heads, nq, pos, 0, totals, scratch);
      continue;
    }
    attend_super_block(t, kv_head, q + i0 * static_cast<int64_t>(heads) * hd, heads, nq - i0, pos + i0, k0,
                       parts + i0 * pf, scratch);
    for (int32_t i = i0; i < nq; ++i) merge_attn_partial(totals + i * pf, parts + i * pf, heads, hd);
  }
  for (int32_t i = 0; i < nq; ++i) finish_attn_partial(totals + i * pf, heads, hd, out + i * out_stride);
}

void merge_attn_partial(float* total, const float* part, int32_t heads, int32_t hd) {
  for (int32_t h = 0; h < heads; ++h) {
    const float ma = total[h], mb = part[h];
    const float m = ma < mb ? mb : ma;
    const float ca = std::exp(ma - m), cb = std::exp(mb - m);
    total[heads + h] = total[heads + h] * ca + part[heads + h] * cb;
    float* a = total + 2 * heads + static_cast<size_t>(h) * hd;
    kernels::scale(a, ca, hd);
    kernels::axpy(a, cb, part + 2 * heads + static_cast<size_t>(h) * hd, hd);
    total[h] = m;
  }
}

void finish_attn_partial(const float* total, int32_t heads, int32_t hd, float* out) {
  for (int32_t h = 0; h < heads; ++h) {
    float* o = out + static_cast<size_t>(h) * hd;
    std::memcpy(o, total + 2 * heads + static_cast<size_t>(h) * hd, sizeof(float) * hd);
    kernels::scale(o, 1.0f / total[heads + h], hd);
  }
}

void attend_group(const KvReadTable& t, int32_t kv_head, const float* q, int32_t heads, int64_t pos, float* out,
                  AttnScratch* scratch, int64_t window) {
  const int32_t hd = t.head_dim();
  scratch->prepare(hd, heads);
  float* total = scratch->total.data();
  float* part = scratch->part.data();
  const int64_t first_key = attn_first_key(pos, window);
  // Super-segments stay aligned to absolute positions; the first one of a window may be partial.
  for (int64_t s = first_key / kSuperTokens; s * kSuperTokens <= pos; ++s) {
    const int64_t k0 = std::max(s * kSuperTokens, first_key);
    const int64_t k1 = std::min((s + 1) * kSuperTokens, pos + 1);
    if (k0 == first_key) {
      attend_super(t, kv_head, q, heads, pos, k0, k1, total, scratch);
    } else {
      attend_super(t, kv_head, q, heads, pos, k0, k1, part, scratch);
      merge_attn_partial(total, part, heads, hd);
    }
  }
  finish_attn_partial(total, heads, hd, out);
}

void attend(const KvReadTable& t, int32_t kv_head, const float* q, int64_t pos, float* out, AttnScratch* scratch,
            int64_t window) {
  attend_group(t, kv_head, q, 1, pos, out, scratch, window);
}

void attend_group(const KvCache& kv, const BlockRef* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int32_t heads, int64_t pos, float* out, AttnScratch* scratch, int64_t window) {
  KvReadTable t;
  t.reset(kv, block_table, pos, pos + 1, window);
  t.bind_layer(layer);
  attend_group(t, kv_head, q, heads, pos, out, scratch, window);
}

void attend(const KvCache& kv, const BlockRef* block_table, int32_t layer, int32_t kv_head, const float* q, int64_t pos,
            float* out, AttnScratch* scratch, int64_t window) {
  attend_group(kv, block_table, layer, kv_head, q, 1, pos, out, scratch, window);
}

}  // namespace hz
