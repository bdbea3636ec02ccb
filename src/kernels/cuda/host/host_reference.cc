// The host forms of the CUDA kernels (kernels/cuda/host_reference.h): loops in the kernels' order.
#include "kernels/cuda/host_reference.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/attention_lanes.h"
#include "kernels/cuda/kv_block_table.h"
#include "kernels/ref/ref_kernels.h"
#include "tensor/dtype.h"

namespace hz::cuda::host {
namespace {

using kernels::KvCodec;
constexpr int64_t kTile = kAttnTileTokens;
constexpr int64_t kSeg = kAttnSegmentTokens;


uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8)); }
float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

int64_t row_elem_bytes(KvCodec c, int64_t hd) { return kernels::kv_row_elem_bytes(c, hd); }

// The kernels' own element and position helpers (attention_lanes.h, compiled for the host too).
using attn::first_key;
using attn::grouped;
using attn::raw_code;

// One CTA of paged_attention_kernel: query block `qb`, KV head `kvh`, segment index `z`.
struct AttnCta {
  const PagedAttnArgs& a;
  int64_t hd, ngroups, glen;
  int32_t group;
  std::vector<float> qs, acc, pt, mrow, lrow, alpha, kraw, vraw, kscale, vscale;
  std::vector<int64_t> rk0, rk1;

  explicit AttnCta(const PagedAttnArgs& args) : a(args) {
    hd = a.head_dim;
    group = a.num_heads / a.num_kv_heads;
    ngroups = (hd + 31) / 32;
    glen = hd < 32 ? hd : 32;
    const int64_t max_rows = static_cast<int64_t>(a.qblock_size) * group;
    qs.resize(max_rows * hd);
    acc.resize(max_rows * hd);
    pt.resize(max_rows * kTile);
    mrow.resize(max_rows);
    lrow.resize(max_rows);
    alpha.resize(max_rows);
    kraw.resize(kTile * hd);
    vraw.resize(kTile * hd);
    kscale.resize(kTile * ngroups);
    vscale.resize(kTile * ngroups);
    rk0.resize(max_rows);
    rk1.resize(max_rows);
  }

  void run(int32_t qb, int32_t kvh, int32_t z) {
    const int32_t q_begin = a.qblock_first[qb];
    const int32_t nq = a.qblock_first[qb + 1] - q_begin;
    const int32_t rows = nq * group;
    const int32_t seq = a.query_seq[q_begin];
    int64_t seg_lo = INT64_MAX, seg_hi = -1;
    for (int32_t i = 0; i < nq; ++i) {
      const int64_t p = a.query_pos[q_begin + i];
      seg_lo = std::min(seg_lo, first_key(p, a.window) / kSeg);
      seg_hi = std::max(seg_hi, p / kSeg);
    }
    const int64_t seg = seg_lo + z;
    if (seg > seg_hi) return;
    const int64_t seg_k0 = seg * kSeg, seg_k1 = seg_k0 + kSeg;
    for (int32_t r = 0; r < rows; ++r) {
      const int64_t p = a.query_pos[q_begin + r / group];
      const int64_t k0 = std::max(seg_k0, first_key(p, a.window)), k1 = std::min(seg_k1, p + 1);
      rk0[r] = k0;
      rk1[r] = k1 > k0 ? k1 : k0;
      mrow[r] = -INFINITY;
      lrow[r] = 0.0f;
    }
    for (int64_t i = 0; i < static_cast<int64_t>(rows) * hd; ++i) {
      const int64_t r = i / hd, d = i % hd;
      const int64_t qi = q_begin + r / group;
      const int64_t h = static_cast<int64_t>(kvh) * group + r % group;
      qs[i] = a.q[(qi * a.num_heads + h) * hd + d] * a.scale;
      acc[i] = 0.0f;
    }
    int64_t cta_k0 = seg_k1, cta_k1 = seg_k0;
    for (int32_t r = 0; r < rows; ++r) {
      if (rk1[r] > rk0[r]) {
        cta_k0 = std::min(cta_k0, rk0[r]);
        cta_k1 = std::max(cta_k1, rk1[r]);
      }
    }
    const device::DeviceKvBlock* table = a.blocks + a.seq_block_begin[seq];
    for (int64_t t0 = cta_k0 / kTile * kTile; t0 < cta_k1; t0 += kTile) {
      for (int64_t i = 0; i < kTile * hd; ++i) {
        const int64_t j = i / hd, d = i % hd, key = t0 + j;
        if (key < cta_k0 || key >= cta_k1) continue;
        const device::DeviceKvBlock& blk = table[key / a.block_tokens];
        const auto c = static_cast<KvCodec>(blk.codec);
        const int64_t row = static_cast<int64_t>(kvh) * a.block_tokens + key % a.block_tokens;
        const int64_t off = row * row_elem_bytes(c, hd);
        kraw[i] = raw_code(c, a.arena + blk.k_elems + a.layer_offset + off, d);
        vraw[i] = raw_code(c, a.arena + blk.v_elems + a.layer_offset + off, d);
        if (d < ngroups) {
          float ks = 1.0f, vs = 1.0f;
          if (grouped(c)) {
            const int64_t so = (row * ngroups + d) * 2;
            ks = f16_to_f32(load_u16(a.arena + blk.k_scales + a.layer_offset + so));
            vs = f16_to_f32(load_u16(a.arena + blk.v_scales + a.layer_offset + so));
          } else if (c == KvCodec::kFp8) {  // one f32 per row
            ks = load_f32(a.arena + blk.k_scales + a.layer_offset + row * 4);
            vs = load_f32(a.arena + blk.v_scales + a.layer_offset + row * 4);
          }
          kscale[j * ngroups + d] = ks;
          vscale[j * ngroups + d] = vs;
        }
      }
      for (int64_t i = 0; i < static_cast<int64_t>(rows) * kTile; ++i) {
        const int64_t r = i / kTile, j = i % kTile, key = t0 + j;
        if (key < rk0[r] || key >= rk1[r]) continue;
        const auto c = static_cast<KvCodec>(table[key / a.block_tokens].codec);
        const float* qr = qs.data() + r * hd;
        const float* kr = kraw.data() + j * hd;
        float s = 0.0f;
        if (grouped(c)) {
          for (int64_t gi = 0; gi < ngroups; ++gi) {
            float t = 0.0f;
            const int64_t e = std::min(hd, (gi + 1) * glen);
            for (int64_t d = gi * glen; d < e; ++d) t = std::fma(qr[d], kr[d], t);
            s = std::fma(kscale[j * ngroups + gi], t, s);
          }
        } else {
          for (int64_t d = 0; d < hd; ++d) s = std::fma(qr[d], kr[d], s);
          if (c == KvCodec::kFp8) s = s * kscale[j * ngroups];
        }
        pt[r * kTile + j] = s;
      }
      for (int32_t r = 0; r < rows; ++r) {
        const int64_t j0 = std::max(t0, rk0[r]) - t0, j1 = std::min(t0 + kTile, rk1[r]) - t0;
        if (j1 <= j0) {
          alpha[r] = 1.0f;
          continue;
        }
        float mt = -INFINITY;
        for (int64_t j = j0; j < j1; ++j) mt = std::fmax(mt, pt[r * kTile + j]);
        const float mn = std::fmax(mrow[r], mt);
        const float al = std::exp(mrow[r] - mn);
        float sum = 0.0f;
        for (int64_t j = j0; j < j1; ++j) {
          const float p = std::exp(pt[r * kTile + j] - mn);
          pt[r * kTile + j] = p;
          sum = sum + p;
        }
        lrow[r] = std::fma(lrow[r], al, sum);
        mrow[r] = mn;
        alpha[r] = al;
      }
      for (int64_t i = 0; i < static_cast<int64_t>(rows) * hd; ++i) {
        const int64_t r = i / hd, d = i % hd;
        const int64_t j0 = std::max(t0, rk0[r]) - t0, j1 = std::min(t0 + kTile, rk1[r]) - t0;
        if (j1 <= j0) continue;
        float v = acc[i] * alpha[r];
        for (int64_t j = j0; j < j1; ++j) {
          const auto c = static_cast<KvCodec>(table[(t0 + j) / a.block_tokens].codec);
          float coef = pt[r * kTile + j];
          if (grouped(c)) coef = coef * vscale[j * ngroups + d / glen];
          if (c == KvCodec::kFp8) coef = coef * vscale[j * ngroups];
          v = std::fma(coef, vraw[j * hd + d], v);
        }
        acc[i] = v;
      }
    }
    for (int32_t r = 0; r < rows; ++r) {
      if (rk1[r] <= rk0[r]) continue;
      const int64_t qi = q_begin + r / group;
      const int64_t h = static_cast<int64_t>(kvh) * group + r % group;
      const int64_t qseg0 = first_key(a.query_pos[qi], a.window) / kSeg;
      float* part = a.partials + ((qi * a.num_heads + h) * a.max_segments + (seg - qseg0)) * (hd + 2);
      part[0] = mrow[r];
      part[1] = lrow[r];
      std::memcpy(part + 2, acc.data() + static_cast<int64_t>(r) * hd, sizeof(float) * hd);
    }
  }
};

}  // namespace

void rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
          int32_t rot_dim, float mscale, bool neox) {
  const int32_t half = rot_dim / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int32_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos[t]) * theta[i];
      const float cs = std::cos(angle) * mscale;
      const float sn = std::sin(angle) * mscale;
      const int32_t ia = neox ? i : 2 * i;
      const int32_t ib = neox ? i + half : 2 * i + 1;
      for (int32_t h = 0; h < num_heads; ++h) {
        float* v = x + (t * num_heads + h) * head_dim;
        const float a = v[ia], b = v[ib];
        v[ia] = a * cs - b * sn;
        v[ib] = a * sn + b * cs;
      }
    }
  }
}

void kv_write(const KvWriteArgs& a) {
  // Each row on its own through the scalar encoder: int8/int4 with their group scales, fp8 with one
  // scale for the row, the float types as they are (no scales).
  const int64_t hd = a.head_dim;
  const int64_t reb = row_elem_bytes(a.codec, hd), rsb = device::arena_row_scale_bytes(a.codec, hd);
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t pos = a.query_pos[t];
    const device::DeviceKvBlock& blk = a.blocks[a.seq_block_begin[a.query_seq[t]] + pos / a.block_tokens];
    for (int64_t h = 0; h < a.num_kv_heads; ++h) {
      const int64_t row = h * a.block_tokens + pos % a.block_tokens;
      for (int st = 0; st < 2; ++st) {
        const float* x = (st == 0 ? a.k : a.v) + (t * a.num_kv_heads + h) * hd;
        uint8_t* er = a.arena + (st == 0 ? blk.k_elems : blk.v_elems) + a.layer_offset + row * reb;
        uint8_t* sc = a.arena + (st == 0 ? blk.k_scales : blk.v_scales) + a.layer_offset + row * rsb;
        kernels::ref::encode_kv_rows(a.codec, x, 1, hd, er, sc);
      }
    }
  }
}

void merge_attention_partials(const PagedAttnArgs& a) {
  // merge_kernel: segments in position order.
  const int64_t hd = a.head_dim;
  for (int64_t qi = 0; qi < a.num_queries; ++qi) {
    const int64_t p = a.query_pos[qi];
    const int64_t nseg = p / kSeg - first_key(p, a.window) / kSeg + 1;
    for (int64_t h = 0; h < a.num_heads; ++h) {
      const float* parts = a.partials + (qi * a.num_heads + h) * a.max_segments * (hd + 2);
      float m = -INFINITY;
      for (int64_t s = 0; s < nseg; ++s) m = std::fmax(m, parts[s * (hd + 2)]);
      float l = 0.0f;
      for (int64_t s = 0; s < nseg; ++s) l = std::fma(parts[s * (hd + 2) + 1], std::exp(parts[s * (hd + 2)] - m), l);
      for (int64_t d = 0; d < hd; ++d) {
        float o = 0.0f;
        for (int64_t s = 0; s < nseg; ++s) o = std::fma(parts[s * (hd + 2) + 2 + d], std::exp(parts[s * (hd + 2)] - m), o);
        a.out[(qi * a.num_heads + h) * hd + d] = o / l;
      }
    }
  }
}

void paged_attention(const PagedAttnArgs& a) {
  AttnCta cta(a);
  for (int32_t qb = 0; qb < a.num_qblocks; ++qb) {
    for (int32_t kvh = 0; kvh < a.num_kv_heads; ++kvh) {
      for (int32_t z = 0; z < a.max_segments; ++z) cta.run(qb, kvh, z);
    }
  }
  merge_attention_partials(a);
}

void paged_attention_chunked(const PagedAttnArgs& a, int num_threads) {
  const int64_t max_rows = static_cast<int64_t>(a.qblock_size) * (a.num_heads / a.num_kv_heads);
  std::vector<int64_t> smem(static_cast<size_t>(attn::smem_bytes(max_rows, a.head_dim) / 8 + 1));
  const attn::Mem m = attn::carve(smem.data(), max_rows, a.head_dim);
  const int nt = num_threads;
  // Every thread of a phase in turn; the end of a phase is the kernel's barrier.
  auto phase = [nt](auto&& fn) {
    for (int tid = 0; tid < nt; ++tid) fn(tid);
  };
  for (int32_t qb = 0; qb < a.num_qblocks; ++qb) {
    for (int32_t kvh = 0; kvh < a.num_kv_heads; ++kvh) {
      for (int32_t z = 0; z < a.max_segments; ++z) {
        const attn::Cta c = attn::setup(a, qb, kvh, z);
        if (!c.active) continue;
        phase([&](int tid) { attn::init(c, m, tid, nt); });
        int64_t k0, k1;
        attn::key_range(c, m, &k0, &k1);
        for (int64_t c0 = k0 / attn::kTile * attn::kTile; c0 < k1; c0 += c.chunk) {
          phase([&](int tid) { attn::scores(c, m, c0, k0, k1, tid, nt); });
          phase([&](int tid) { attn::tile_max(c, m, c0, tid, nt); });
          phase([&](int tid) { attn::row_scan(c, m, c0, tid, nt); });
          phase([&](int tid) { attn::probs(c, m, c0, tid, nt); });
          phase([&](int tid) { attn::tile_sums(c, m, c0, tid, nt); });
          phase([&](int tid) { attn::accumulate(c, m, c0, tid, nt); });
        }
        phase([&](int tid) { attn::write_partials(c, m, tid, nt); });
      }
    }
  }
  merge_attention_partials(a);
}

}  // namespace hz::cuda::host
