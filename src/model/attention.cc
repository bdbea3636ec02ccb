#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/attn_kernels.h"
#include "kernels/kernels.h"

namespace hz {

void AttnScratch::prepare(const KvCache& kv, int32_t heads) {
  const KvCacheConfig& c = kv.config();
  const size_t hd = static_cast<size_t>(c.head_dim);
  const size_t pf = static_cast<size_t>(attn_partial_floats(heads, c.head_dim));
  if (q.size() < heads * hd) q.resize(heads * hd);
  if (scores.size() < static_cast<size_t>(heads) * kTileTokens) scores.resize(static_cast<size_t>(heads) * kTileTokens);
  if (part.size() < pf) part.resize(pf);
  if (total.size() < pf) total.resize(pf);
  if (kv.staged() && src.size() < c.block_tokens * hd) {
    src.resize(c.block_tokens * hd);
    uint64_t most = 0;
    for (KvType t : all_kv_types()) most = std::max(most, kv.plane_bytes_for(t));
    enc_k.resize(most);
    enc_v.resize(most);
  }
}

namespace {

// Where one tile's K and V rows are read from: the exact plane or the arena directly, or (staged
// blocks read in a compact form) an on-the-fly encode of `block` in `codec` into the scratch.
struct TileSrc {
  kernels::KvCodec codec;
  const uint8_t* k = nullptr;   // first row's elements (direct reads)
  const uint8_t* v = nullptr;
  const uint8_t* ks = nullptr;  // first row's scales (fp8: the head's scale), null for exact rows
  const uint8_t* vs = nullptr;
  uint64_t bytes = 0;           // element bytes of the tile's rows
  bool encode = false;          // read through KvCache::encode_head (k, v unset)
  int32_t block = 0;
  int32_t slot = 0;
  int32_t far_slot = -1;        // the far tier's slot of a far block (kv/far_tier.h)
};

TileSrc locate(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, int64_t query_pos,
               int64_t t0, int32_t n) {
  const KvCacheConfig& c = kv.config();
  const int64_t bi = t0 / c.block_tokens;
  TileSrc t;
  t.block = block_table[bi];
  t.slot = static_cast<int32_t>(t0 % c.block_tokens);
  if (kv.is_far(t.block)) t.far_slot = t.block - c.num_blocks;
  const KvRead form = kv.staged() ? kv.read_form(query_pos, bi) : KvRead::kExact;
  const KvPrecision& pr = kv.precision();
  if (form == KvRead::kExact || (form == KvRead::kHot && pr.hot == kv.exact_codec())) {
    t.codec = kv.exact_codec();
    const uint8_t* kplane = kv.exact_plane(t.block, layer, 0);
    HZ_DCHECK(kplane != nullptr);
    const uint64_t off = (static_cast<uint64_t>(kv_head) * c.block_tokens + t.slot) * kv.exact_row_bytes();
    t.k = kplane + off;
    t.v = kv.exact_plane(t.block, layer, 1) + off;
    t.bytes = static_cast<uint64_t>(n) * kv.exact_row_bytes();
    return t;
  }
  t.codec = form == KvRead::kHot ? pr.hot : kv.arena_type();
  if (form != KvRead::kCold || !kv.arena_valid(t.block, layer)) {
    t.encode = true;
    return t;
  }
  const uint64_t reb = kernels::kv_row_elem_bytes(t.codec, c.head_dim);
  const uint64_t eoff = kv.head_elem_offset(t.codec, kv_head) + t.slot * reb;
  const uint64_t soff = kv.head_scale_offset(t.codec, kv_head) + t.slot * kernels::kv_row_scale_bytes(t.codec, c.head_dim);
  const uint8_t* kplane = kv.plane(t.block, layer, 0);
  const uint8_t* vplane = kv.plane(t.block, layer, 1);
  t.k = kplane + eoff;
  t.v = vplane + eoff;
  t.ks = kplane + soff;  // fp8: row scale bytes are 0, this is the head's scale
  t.vs = vplane + soff;
  t.bytes = static_cast<uint64_t>(n) * reb;
  return t;
}

// Consecutive tiles live in different blocks (far apart, in other pages), which the hardware
// prefetchers do not follow: the next tile's rows are requested while this one is computed.
void prefetch(const TileSrc& t) {
  if (t.encode) return;
  for (uint64_t o = 0; o < t.bytes; o += 64) {
    __builtin_prefetch(t.k + o);
    __builtin_prefetch(t.v + o);
  }
  if (t.ks != nullptr) {
    __builtin_prefetch(t.ks);
    __builtin_prefetch(t.vs);
  }
}

int32_t tile_len(int64_t t0, int64_t key_end) {
  return static_cast<int32_t>(std::min<int64_t>(kTileTokens - t0 % kTileTokens, key_end - t0));
}

}  // namespace

namespace {

// One tile of the online softmax: the scores of `heads` queries against the tile's `n` keys, then
// the running state in `part` (max, sum, weighted values) updated — the one sequence of operations
// every path applies, so a query's result depends on positions only.
void tile_update(const KvCache& kv, int32_t layer, int32_t kv_head, const float* q, int32_t heads, TileSrc& cur,
                 int32_t n, float* part, bool first, AttnScratch* sc, int32_t* far_checked) {
  const int32_t hd = kv.config().head_dim;
  float* mx = part;
  float* sum = part + heads;
  float* acc = part + 2 * heads;
  float* scores = sc->scores.data();
  if (cur.far_slot >= 0 && cur.block != *far_checked) {
    // A block read from disk: this head's K and V rows are checked against their checksums
    // before use (once per pass; a mismatch is reported and the sequence recomputed).
    kv.far()->verify(cur.far_slot, layer, kv_head);
    kv.far()->verify(cur.far_slot, layer, kv.config().num_kv_heads + kv_head);
    *far_checked = cur.block;
  }
  if (cur.encode) {
    // A staged block read in a compact form: encoded on the fly from its staging copy by the
    // same encoder commit() uses (the same bytes the arena will hold).
    if (sc->enc_block != cur.block || sc->enc_codec != static_cast<int32_t>(cur.codec)) {
      kv.encode_head(cur.codec, cur.block, layer, 0, kv_head, sc->src.data(), sc->enc_k.data());
      kv.encode_head(cur.codec, cur.block, layer, 1, kv_head, sc->src.data(), sc->enc_v.data());
      sc->enc_block = cur.block;
      sc->enc_codec = static_cast<int32_t>(cur.codec);
    }
    const uint64_t reb = kernels::kv_row_elem_bytes(cur.codec, hd);
    const uint64_t eoff = kv.head_elem_offset(cur.codec, kv_head) + cur.slot * reb;
    const uint64_t soff = kv.head_scale_offset(cur.codec, kv_head) + cur.slot * kernels::kv_row_scale_bytes(cur.codec, hd);
    cur.k = sc->enc_k.data() + eoff;
    cur.v = sc->enc_v.data() + eoff;
    cur.ks = sc->enc_k.data() + soff;
    cur.vs = sc->enc_v.data() + soff;
  }
  kernels::kv_scores(cur.codec, q, heads, cur.k, cur.ks, n, hd, scores);
  for (int32_t h = 0; h < heads; ++h) {
    float* s = scores + h * n;
    float tile_max = s[0];
    for (int32_t j = 1; j < n; ++j) tile_max = std::max(tile_max, s[j]);
    float* ah = acc + static_cast<size_t>(h) * hd;
    if (first) {
      mx[h] = tile_max;
      sum[h] = 0;
      std::memset(ah, 0, sizeof(float) * hd);
    } else if (mx[h] < tile_max) {
      // A new maximum rescales the running state; an unchanged one would scale by exp(0) = 1.
      const float corr = std::exp(mx[h] - tile_max);
      sum[h] *= corr;
      kernels::scale(ah, corr, hd);
      mx[h] = tile_max;
    }
    sum[h] += kernels::exp_shift_sum(s, n, mx[h]);  // scores become probabilities
  }
  kernels::kv_accumulate(cur.codec, scores, heads, cur.v, cur.vs, n, hd, acc);
}

}  // namespace

void attend_super(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int32_t heads, int64_t query_pos, int64_t key_begin, int64_t key_end, float* part, AttnScratch* sc) {
  HZ_DCHECK(key_begin < key_end);
  HZ_DCHECK(key_begin / kSuperTokens == (key_end - 1) / kSuperTokens);
  sc->enc_block = -1;
  int32_t far_checked = -1;
  bool first = true;
  // Tiles are aligned to absolute multiples of kTileTokens (a window's first tile may be partial),
  // so a tile never crosses a block boundary and its bounds depend on positions only.
  int32_t n = tile_len(key_begin, key_end);
  TileSrc cur = locate(kv, block_table, layer, kv_head, query_pos, key_begin, n);
  for (int64_t t0 = key_begin; t0 < key_end;) {
    TileSrc next;
    int32_t next_n = 0;
    if (t0 + n < key_end) {
      next_n = tile_len(t0 + n, key_end);
      next = locate(kv, block_table, layer, kv_head, query_pos, t0 + n, next_n);
      prefetch(next);
    }
    tile_update(kv, layer, kv_head, q, heads, cur, n, part, first, sc, &far_checked);
    first = false;
    t0 += n;
    n = next_n;
    cur = next;
  }
}

void attend_super_block(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                        int32_t heads, int32_t nq, const int64_t* pos, int64_t key_begin, float* parts, AttnScratch* sc) {
  HZ_DCHECK(key_begin % kSuperTokens == 0);
  const int64_t qf = static_cast<int64_t>(heads) * kv.config().head_dim;
  const int64_t pf = attn_partial_floats(heads, kv.config().head_dim);
  const int64_t seg_end = key_begin + kSuperTokens;
  const int64_t last = std::min(seg_end, pos[nq - 1] + 1);
  if (sc->first.size() < static_cast<size_t>(nq)) sc->first.resize(nq);
  std::fill(sc->first.begin(), sc->first.begin() + nq, uint8_t{1});
  sc->enc_block = -1;
  int32_t far_checked = -1;
  // Tile by tile, every query of the block that reaches it: the tile's K/V rows are read from
  // memory once and stay in L1 for the others. Per query the tiles, their lengths and the
  // operations are those of attend_super.
  for (int64_t t0 = key_begin; t0 < last; t0 += kTileTokens - t0 % kTileTokens) {
    for (int32_t i = 0; i < nq; ++i) {
      const int64_t end = std::min(seg_end, pos[i] + 1);
      if (t0 >= end) continue;
      const int32_t n = tile_len(t0, end);
      TileSrc cur = locate(kv, block_table, layer, kv_head, pos[i], t0, n);
      tile_update(kv, layer, kv_head, q + i * qf, heads, cur, n, parts + i * pf, sc->first[i] != 0, sc, &far_checked);
      sc->first[i] = 0;
    }
  }
}

void attend_group_block(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                        int32_t heads, int32_t nq, const int64_t* pos, float* out, int64_t out_stride,
                        AttnScratch* scratch) {
  const int32_t hd = kv.config().head_dim;
  const int64_t pf = attn_partial_floats(heads, hd);
  scratch->prepare(kv, heads);
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
      attend_super_block(kv, block_table, layer, kv_head, q, heads, nq, pos, 0, totals, scratch);
      continue;
    }
    attend_super_block(kv, block_table, layer, kv_head, q + i0 * static_cast<int64_t>(heads) * hd, heads, nq - i0, pos + i0,
                       k0, parts + i0 * pf, scratch);
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

void attend_group(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q,
                  int32_t heads, int64_t pos, float* out, AttnScratch* scratch, int64_t window) {
  const int32_t hd = kv.config().head_dim;
  scratch->prepare(kv, heads);
  float* total = scratch->total.data();
  float* part = scratch->part.data();
  const int64_t first_key = attn_first_key(pos, window);
  // Super-segments stay aligned to absolute positions; the first one of a window may be partial.
  for (int64_t s = first_key / kSuperTokens; s * kSuperTokens <= pos; ++s) {
    const int64_t k0 = std::max(s * kSuperTokens, first_key);
    const int64_t k1 = std::min((s + 1) * kSuperTokens, pos + 1);
    if (k0 == first_key) {
      attend_super(kv, block_table, layer, kv_head, q, heads, pos, k0, k1, total, scratch);
    } else {
      attend_super(kv, block_table, layer, kv_head, q, heads, pos, k0, k1, part, scratch);
      merge_attn_partial(total, part, heads, hd);
    }
  }
  finish_attn_partial(total, heads, hd, out);
}

void attend(const KvCache& kv, const int32_t* block_table, int32_t layer, int32_t kv_head, const float* q, int64_t pos,
            float* out, AttnScratch* scratch, int64_t window) {
  attend_group(kv, block_table, layer, kv_head, q, 1, pos, out, scratch, window);
}

}  // namespace hz
