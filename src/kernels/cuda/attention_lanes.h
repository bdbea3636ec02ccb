// The chunked paged-attention kernel's phases (attention_chunked.cu), compiled for the GPU by nvcc
// and for the host by the C++ compiler: a CTA's threads run each phase for their share of the work,
// with a barrier between phases; on the host, host::paged_attention_chunked (host_reference.h) runs
// every thread of a phase in turn. CI checks the host run bit for bit against the first kernel's host
// form and against the double-precision reference (tests/kernels/cuda_attention_lanes_test.cc).
//
// Same arithmetic as the first kernel (attention.cu), value by value — so the same results, and the
// same exactness rule (a query's result depends on positions only): per row (query head), keys in
// 32-key tiles aligned to absolute positions, scores as dot products over dims in order (int8/int4:
// per 32-dim group, then times the group's scale), a tile's max, the running max, probabilities
// exp(s - max), the tile's sum in key order, l = l * alpha + sum, acc = acc * alpha + p * v in key
// order. What changes is the schedule: the first kernel ran the tiles one after the other, four
// barriers each, with K and V staged in shared memory as f32; this one takes a chunk of up to 512
// keys at a time (rows x chunk <= 4096 scores) in six phases, each parallel over keys, tiles or
// (row, dim), and reads K and V codes straight from the arena:
//   1. scores: a thread per key, every row of the CTA (in batches of 4 rows), K row read once;
//   2. tile maxima, a thread per (row, tile);
//   3. the running max tile by tile and each tile's rescale factor, a thread per row;
//   4. probabilities, a thread per (row, key);
//   5. tile sums in key order, a thread per (row, tile);
//   6. l and the accumulators, a thread per row / per (row, dim), tile by tile in key order.
#pragma once

#include <cstdint>

#include "device/kv_block_desc.h"
#include "kernels/cuda/lane_ops.h"
#include "kernels/cuda/launch.h"
#include "kernels/kv_codec.h"

#include <climits>

namespace hz::cuda::attn {

using kernels::KvCodec;
constexpr int64_t kTile = kAttnTileTokens;
constexpr int64_t kSeg = kAttnSegmentTokens;
constexpr int32_t kRowBatch = 4;      // rows scored together against one K row
constexpr int64_t kChunkScores = 4096;  // rows x chunk keys held in shared memory

HZ_LANE_FN int64_t first_key(int64_t pos, int64_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

HZ_LANE_FN int64_t row_elem_bytes(KvCodec c, int64_t hd) {
  switch (c) {
    case KvCodec::kF32: return 4 * hd;
    case KvCodec::kF16:
    case KvCodec::kBF16: return 2 * hd;
    case KvCodec::kFp8:
    case KvCodec::kInt8: return hd;
    case KvCodec::kInt4: return (hd + 1) / 2;
    default: break;  // the per-channel and low-bit CPU types: never in a device arena
  }
  return 0;
}

// Element i of a row as stored, before scales.
template <KvCodec C>
HZ_LANE_FN float code_at(const uint8_t* row, int64_t i) {
  if constexpr (C == KvCodec::kF32) return lanes::load_f32(row + 4 * i);
  if constexpr (C == KvCodec::kF16) return lanes::half_to_f32(lanes::load_u16(row + 2 * i));
  if constexpr (C == KvCodec::kBF16) return lanes::bf16_bits_to_f32(lanes::load_u16(row + 2 * i));
  if constexpr (C == KvCodec::kFp8) return lanes::e4m3_to_f32(row[i]);
  if constexpr (C == KvCodec::kInt8) return static_cast<float>(static_cast<int8_t>(row[i]));
  if constexpr (C == KvCodec::kInt4) return static_cast<float>(((row[i / 2] >> ((i & 1) * 4)) & 15) - 8);
  return 0.0f;
}

HZ_LANE_FN float raw_code(KvCodec c, const uint8_t* row, int64_t i) {
  switch (c) {
    case KvCodec::kF32: return code_at<KvCodec::kF32>(row, i);
    case KvCodec::kF16: return code_at<KvCodec::kF16>(row, i);
    case KvCodec::kBF16: return code_at<KvCodec::kBF16>(row, i);
    case KvCodec::kFp8: return code_at<KvCodec::kFp8>(row, i);
    case KvCodec::kInt8: return code_at<KvCodec::kInt8>(row, i);
    case KvCodec::kInt4: return code_at<KvCodec::kInt4>(row, i);
    default: break;
  }
  return 0.0f;
}

HZ_LANE_FN bool grouped(KvCodec c) { return c == KvCodec::kInt8 || c == KvCodec::kInt4; }

// Keys of a chunk for a CTA of up to max_rows rows: a multiple of the tile, 32..512.
HZ_LANE_FN int64_t chunk_keys(int64_t max_rows) {
  int64_t c = kChunkScores / (max_rows > 0 ? max_rows : 1) / kTile * kTile;
  if (c < kTile) c = kTile;
  if (c > kSeg) c = kSeg;
  return c;
}

HZ_LANE_FN int64_t scale_groups(int64_t hd) { return (hd + 31) / 32; }

// Shared memory of one CTA, bytes (the int64 arrays first, then the floats and int32s).
HZ_LANE_FN int64_t smem_bytes(int64_t max_rows, int64_t hd) {
  const int64_t c = chunk_keys(max_rows), tiles = c / kTile;
  const int64_t floats = 2 * max_rows * hd + max_rows * c + 3 * max_rows * tiles + 2 * max_rows +
                         c * scale_groups(hd) + c;
  return (2 * max_rows + c) * 8 + floats * 4;
}

// A CTA's shared arrays.
struct Mem {
  int64_t* rk0;   // [max_rows] each row's keys in this segment: [rk0, rk1)
  int64_t* rk1;
  float* qs;      // [max_rows][hd] scaled queries
  float* acc;     // [max_rows][hd]
  float* s;       // [max_rows][chunk] scores, then probabilities
  float* tmax;    // [max_rows][tiles] a tile's max score, then the running max its probabilities use
  float* talpha;  // [max_rows][tiles] the factor that rescales what came before the tile
  float* tsum;    // [max_rows][tiles]
  float* mrow;    // [max_rows] running max
  float* lrow;    // [max_rows] running sum
  // Per key of the chunk, set in the score phase for the accumulators: its V row (arena offset),
  // codec and the factor each scale group's coefficients take (int8/int4: the group's scale; fp8:
  // the row's; the float codecs 1, an exact no-op).
  int64_t* voff;   // [chunk]
  float* vscale;   // [chunk][scale groups]
  int32_t* vcodec; // [chunk]
};

HZ_LANE_FN Mem carve(void* base, int64_t max_rows, int64_t hd) {
  const int64_t c = chunk_keys(max_rows), tiles = c / kTile;
  Mem m;
  m.rk0 = static_cast<int64_t*>(base);
  m.rk1 = m.rk0 + max_rows;
  m.voff = m.rk1 + max_rows;
  float* f = reinterpret_cast<float*>(m.voff + c);
  m.qs = f;
  m.acc = m.qs + max_rows * hd;
  m.s = m.acc + max_rows * hd;
  m.tmax = m.s + max_rows * c;
  m.talpha = m.tmax + max_rows * tiles;
  m.tsum = m.talpha + max_rows * tiles;
  m.mrow = m.tsum + max_rows * tiles;
  m.lrow = m.mrow + max_rows;
  m.vscale = m.lrow + max_rows;
  m.vcodec = reinterpret_cast<int32_t*>(m.vscale + c * scale_groups(hd));
  return m;
}

// What every thread of a CTA (query block qb, KV head kvh, segment index z) knows alike.
struct Cta {
  const PagedAttnArgs* a;
  int32_t kvh, q_begin, rows, group;
  int64_t hd, ngroups, glen, seg, chunk, tiles, max_rows;
  const device::DeviceKvBlock* table;
  bool active;  // the segment is one of the block's
};

HZ_LANE_FN Cta setup(const PagedAttnArgs& a, int32_t qb, int32_t kvh, int32_t z) {
  Cta c;
  c.a = &a;
  c.kvh = kvh;
  c.hd = a.head_dim;
  c.group = a.num_heads / a.num_kv_heads;
  c.q_begin = a.qblock_first[qb];
  const int32_t nq = a.qblock_first[qb + 1] - c.q_begin;
  c.rows = nq * c.group;
  c.ngroups = (c.hd + 31) / 32;  // scale groups per row (one group when head_dim < 32)
  c.glen = c.hd < 32 ? c.hd : 32;
  c.max_rows = static_cast<int64_t>(a.qblock_size) * c.group;
  c.chunk = chunk_keys(c.max_rows);
  c.tiles = c.chunk / kTile;
  int64_t seg_lo = INT64_MAX, seg_hi = -1;
  for (int32_t i = 0; i < nq; ++i) {
    const int64_t p = a.query_pos[c.q_begin + i];
    const int64_t f = first_key(p, a.window) / kSeg, l = p / kSeg;
    seg_lo = f < seg_lo ? f : seg_lo;
    seg_hi = l > seg_hi ? l : seg_hi;
  }
  c.seg = seg_lo + z;
  c.active = c.seg <= seg_hi;
  c.table = a.blocks + a.seq_block_begin[a.query_seq[c.q_begin]];
  return c;
}

// Row r's keys [j0, j1) of the tile at t0, relative to t0 (empty when j1 <= j0).
HZ_LANE_FN void tile_span(const Mem& m, int32_t r, int64_t t0, int64_t* j0, int64_t* j1) {
  const int64_t lo = t0 > m.rk0[r] ? t0 : m.rk0[r];
  const int64_t hi = t0 + kTile < m.rk1[r] ? t0 + kTile : m.rk1[r];
  *j0 = lo - t0;
  *j1 = hi - t0;
}

// Phase 0: each row's keys in the segment and its state; the scaled queries; zero accumulators.
HZ_LANE_FN void init(const Cta& c, const Mem& m, int tid, int nt) {
  const PagedAttnArgs& a = *c.a;
  const int64_t seg_k0 = c.seg * kSeg, seg_k1 = seg_k0 + kSeg;
  for (int32_t r = tid; r < c.rows; r += nt) {
    const int64_t p = a.query_pos[c.q_begin + r / c.group];
    const int64_t fk = first_key(p, a.window);
    const int64_t k0 = seg_k0 > fk ? seg_k0 : fk, k1 = seg_k1 < p + 1 ? seg_k1 : p + 1;
    m.rk0[r] = k0;
    m.rk1[r] = k1 > k0 ? k1 : k0;  // empty when this segment is outside the query's keys
    m.mrow[r] = -INFINITY;
    m.lrow[r] = 0.0f;
  }
  for (int64_t i = tid; i < static_cast<int64_t>(c.rows) * c.hd; i += nt) {
    const int64_t r = i / c.hd, d = i % c.hd;
    const int64_t qi = c.q_begin + r / c.group;
    const int64_t h = static_cast<int64_t>(c.kvh) * c.group + r % c.group;
    m.qs[i] = lanes::mul_rn(a.q[(qi * a.num_heads + h) * c.hd + d], a.scale);
    m.acc[i] = 0.0f;
  }
}

// The keys any row of the CTA reads in this segment (after init): [*k0, *k1), empty if *k1 <= *k0.
HZ_LANE_FN void key_range(const Cta& c, const Mem& m, int64_t* k0, int64_t* k1) {
  int64_t lo = (c.seg + 1) * kSeg, hi = c.seg * kSeg;
  for (int32_t r = 0; r < c.rows; ++r) {
    if (m.rk1[r] > m.rk0[r]) {
      lo = m.rk0[r] < lo ? m.rk0[r] : lo;
      hi = m.rk1[r] > hi ? m.rk1[r] : hi;
    }
  }
  *k0 = lo;
  *k1 = hi;
}

// Codes of C in 16 bytes.
template <KvCodec C>
HZ_LANE_FN constexpr int64_t codes_per_load() {
  return C == KvCodec::kF32 ? 4 : (C == KvCodec::kF16 || C == KvCodec::kBF16) ? 8 : C == KvCodec::kInt4 ? 32 : 16;
}

// acc[b] = fma(q[b][d], code d, acc[b]) for d = d0, d0 + 1, ..., d1 - 1 in order, b < kRowBatch.
// The codes come 16 bytes a load when the row is 16-byte aligned (`vec`) and d0 starts a load (one
// thread reads its own key's row: byte loads would take a cache wavefront per byte), else one by
// one; the same values either way.
template <KvCodec C>
HZ_LANE_FN void dot_span(const uint8_t* kp, bool vec, const float* const* q, int64_t d0, int64_t d1, float* acc) {
  constexpr int64_t kE = codes_per_load<C>();
  int64_t d = d0;
  if (vec && d0 % kE == 0) {
    for (; d + kE <= d1; d += kE) {
      alignas(16) uint8_t raw[16];
      lanes::load16(kp + d * 16 / kE, raw);  // code d's byte: 16 bytes hold kE codes
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int64_t i = 0; i < kE; ++i) {
        const float kv = code_at<C>(raw, i);
        for (int32_t b = 0; b < kRowBatch; ++b) acc[b] = lanes::fma_rn(q[b][d + i], kv, acc[b]);
      }
    }
  }
  for (; d < d1; ++d) {
    const float kv = code_at<C>(kp, d);
    for (int32_t b = 0; b < kRowBatch; ++b) acc[b] = lanes::fma_rn(q[b][d], kv, acc[b]);
  }
}

// The scores of key `key` (chunk index j) for rows r0..r0 + 3, with codec C.
template <KvCodec C>
HZ_LANE_FN void score_key(const Cta& c, const Mem& m, int64_t key, int64_t j, int32_t r0) {
  const PagedAttnArgs& a = *c.a;
  const device::DeviceKvBlock& blk = c.table[key / a.block_tokens];
  const int64_t row = static_cast<int64_t>(c.kvh) * a.block_tokens + key % a.block_tokens;
  const uint8_t* kp = a.arena + blk.k_elems + a.layer_offset + row * row_elem_bytes(C, c.hd);
  const uint8_t* sp = a.arena + blk.k_scales + a.layer_offset;
  const float* q[kRowBatch];
  for (int32_t b = 0; b < kRowBatch; ++b) {
    const int32_t r = r0 + b < c.rows ? r0 + b : c.rows - 1;  // rows past the CTA's: computed, not stored
    q[b] = m.qs + static_cast<int64_t>(r) * c.hd;
  }
  float s[kRowBatch];
  for (int32_t b = 0; b < kRowBatch; ++b) s[b] = 0.0f;
  const bool vec = reinterpret_cast<uintptr_t>(kp) % 16 == 0;
  if constexpr (C == KvCodec::kInt8 || C == KvCodec::kInt4) {
    for (int64_t gi = 0; gi < c.ngroups; ++gi) {
      float t[kRowBatch];
      for (int32_t b = 0; b < kRowBatch; ++b) t[b] = 0.0f;
      const int64_t e = c.hd < (gi + 1) * c.glen ? c.hd : (gi + 1) * c.glen;
      dot_span<C>(kp, vec, q, gi * c.glen, e, t);
      // Scales by bytes: a plane of odd size (odd heads x block tokens) leaves them unaligned.
      const float ks = lanes::half_to_f32(lanes::load_u16_any(sp + (row * c.ngroups + gi) * 2));
      for (int32_t b = 0; b < kRowBatch; ++b) s[b] = lanes::fma_rn(ks, t[b], s[b]);
    }
  } else {
    dot_span<C>(kp, vec, q, 0, c.hd, s);
    if constexpr (C == KvCodec::kFp8) {
      const float ks = lanes::load_f32_any(sp + row * 4);  // one f32 per row (device/kv_block_desc.h)
      for (int32_t b = 0; b < kRowBatch; ++b) s[b] = lanes::mul_rn(s[b], ks);
    }
  }
  for (int32_t b = 0; b < kRowBatch; ++b) {
    const int32_t r = r0 + b;
    if (r < c.rows && key >= m.rk0[r] && key < m.rk1[r]) m.s[static_cast<int64_t>(r) * c.chunk + j] = s[b];
  }
}

// Phase 1: the scores of the chunk's keys [c0, c0 + chunk) within [k0, k1), a thread per key.
HZ_LANE_FN void scores(const Cta& c, const Mem& m, int64_t c0, int64_t k0, int64_t k1, int tid, int nt) {
  for (int64_t j = tid; j < c.chunk; j += nt) {
    const int64_t key = c0 + j;
    if (key < k0 || key >= k1) continue;
    const PagedAttnArgs& a = *c.a;
    const device::DeviceKvBlock& blk = c.table[key / a.block_tokens];
    const auto codec = static_cast<KvCodec>(blk.codec);
    const int64_t row = static_cast<int64_t>(c.kvh) * a.block_tokens + key % a.block_tokens;
    m.voff[j] = static_cast<int64_t>(blk.v_elems + a.layer_offset) + row * row_elem_bytes(codec, c.hd);
    m.vcodec[j] = static_cast<int32_t>(codec);
    for (int64_t g = 0; g < c.ngroups; ++g) {
      float f = 1.0f;
      if (grouped(codec)) {
        f = lanes::half_to_f32(lanes::load_u16_any(a.arena + blk.v_scales + a.layer_offset + (row * c.ngroups + g) * 2));
      } else if (codec == KvCodec::kFp8) {
        f = lanes::load_f32_any(a.arena + blk.v_scales + a.layer_offset + row * 4);
      }
      m.vscale[j * c.ngroups + g] = f;
    }
    for (int32_t r0 = 0; r0 < c.rows; r0 += kRowBatch) {
      switch (codec) {
        case KvCodec::kF32: score_key<KvCodec::kF32>(c, m, key, j, r0); break;
        case KvCodec::kF16: score_key<KvCodec::kF16>(c, m, key, j, r0); break;
        case KvCodec::kBF16: score_key<KvCodec::kBF16>(c, m, key, j, r0); break;
        case KvCodec::kFp8: score_key<KvCodec::kFp8>(c, m, key, j, r0); break;
        case KvCodec::kInt8: score_key<KvCodec::kInt8>(c, m, key, j, r0); break;
        case KvCodec::kInt4: score_key<KvCodec::kInt4>(c, m, key, j, r0); break;
        default: break;
      }
    }
  }
}

// Phase 2: each (row, tile): the largest score the row sees in the tile.
HZ_LANE_FN void tile_max(const Cta& c, const Mem& m, int64_t c0, int tid, int nt) {
  for (int64_t i = tid; i < static_cast<int64_t>(c.rows) * c.tiles; i += nt) {
    const int32_t r = static_cast<int32_t>(i / c.tiles);
    const int64_t t = i % c.tiles;
    int64_t j0, j1;
    tile_span(m, r, c0 + t * kTile, &j0, &j1);
    float mt = -INFINITY;
    for (int64_t j = j0; j < j1; ++j) mt = lanes::fmax_f(mt, m.s[r * c.chunk + t * kTile + j]);
    m.tmax[i] = mt;
  }
}

// Phase 3: each row, tile by tile: the running max (into tmax) and the tile's rescale factor.
HZ_LANE_FN void row_scan(const Cta& c, const Mem& m, int64_t c0, int tid, int nt) {
  for (int32_t r = tid; r < c.rows; r += nt) {
    float mr = m.mrow[r];
    for (int64_t t = 0; t < c.tiles; ++t) {
      int64_t j0, j1;
      tile_span(m, r, c0 + t * kTile, &j0, &j1);
      const int64_t i = r * c.tiles + t;
      if (j1 <= j0) {
        m.talpha[i] = 1.0f;
        continue;
      }
      const float mn = lanes::fmax_f(mr, m.tmax[i]);
      m.talpha[i] = lanes::exp_f(lanes::sub_rn(mr, mn));
      m.tmax[i] = mn;
      mr = mn;
    }
    m.mrow[r] = mr;
  }
}

// Phase 4: probabilities p = exp(s - running max of its tile), a thread per (row, key).
HZ_LANE_FN void probs(const Cta& c, const Mem& m, int64_t c0, int tid, int nt) {
  for (int64_t i = tid; i < static_cast<int64_t>(c.rows) * c.chunk; i += nt) {
    const int32_t r = static_cast<int32_t>(i / c.chunk);
    const int64_t j = i % c.chunk, key = c0 + j;
    if (key < m.rk0[r] || key >= m.rk1[r]) continue;
    m.s[i] = lanes::exp_f(lanes::sub_rn(m.s[i], m.tmax[r * c.tiles + j / kTile]));
  }
}

// Phase 5: each (row, tile): its probabilities summed in key order.
HZ_LANE_FN void tile_sums(const Cta& c, const Mem& m, int64_t c0, int tid, int nt) {
  for (int64_t i = tid; i < static_cast<int64_t>(c.rows) * c.tiles; i += nt) {
    const int32_t r = static_cast<int32_t>(i / c.tiles);
    const int64_t t = i % c.tiles;
    int64_t j0, j1;
    tile_span(m, r, c0 + t * kTile, &j0, &j1);
    float sum = 0.0f;
    for (int64_t j = j0; j < j1; ++j) sum = lanes::add_rn(sum, m.s[r * c.chunk + t * kTile + j]);
    m.tsum[i] = sum;
  }
}

// Phase 6: each row's l = l * alpha + sum and each (row, dim)'s acc = acc * alpha + p * v, tile by
// tile in key order (the V scale folded into p).
HZ_LANE_FN void accumulate(const Cta& c, const Mem& m, int64_t c0, int tid, int nt) {
  const PagedAttnArgs& a = *c.a;
  for (int32_t r = tid; r < c.rows; r += nt) {
    float l = m.lrow[r];
    for (int64_t t = 0; t < c.tiles; ++t) {
      int64_t j0, j1;
      tile_span(m, r, c0 + t * kTile, &j0, &j1);
      if (j1 > j0) l = lanes::fma_rn(l, m.talpha[r * c.tiles + t], m.tsum[r * c.tiles + t]);
    }
    m.lrow[r] = l;
  }
  for (int64_t i = tid; i < static_cast<int64_t>(c.rows) * c.hd; i += nt) {
    const int32_t r = static_cast<int32_t>(i / c.hd);
    const int64_t d = i % c.hd, g = d / c.glen;
    float v = m.acc[i];
    for (int64_t t = 0; t < c.tiles; ++t) {
      const int64_t t0 = c0 + t * kTile;
      int64_t j0, j1;
      tile_span(m, r, t0, &j0, &j1);
      if (j1 <= j0) continue;
      v = lanes::mul_rn(v, m.talpha[r * c.tiles + t]);
      // Unrolled on the GPU so that the V loads of several keys are in flight at once: the chain
      // of fmas waits on each (the loads do not depend on it).
#if defined(__CUDA_ARCH__)
#pragma unroll 8
#endif
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t k = t * kTile + j;  // the key's chunk index
        // coef = p, times the V scale where the codec has one (times 1 is exact: the same bits).
        const float coef = lanes::mul_rn(m.s[r * c.chunk + k], m.vscale[k * c.ngroups + g]);
        v = lanes::fma_rn(coef, raw_code(static_cast<KvCodec>(m.vcodec[k]), a.arena + m.voff[k], d), v);
      }
    }
    m.acc[i] = v;
  }
}

// Last: one partial per (query, head) with keys here, [max, sum, acc[hd]], at the query's own
// segment index.
HZ_LANE_FN void write_partials(const Cta& c, const Mem& m, int tid, int nt) {
  const PagedAttnArgs& a = *c.a;
  for (int64_t i = tid; i < static_cast<int64_t>(c.rows) * (c.hd + 2); i += nt) {
    const int32_t r = static_cast<int32_t>(i / (c.hd + 2));
    const int64_t f = i % (c.hd + 2);
    if (m.rk1[r] <= m.rk0[r]) continue;
    const int64_t qi = c.q_begin + r / c.group;
    const int64_t h = static_cast<int64_t>(c.kvh) * c.group + r % c.group;
    const int64_t qseg0 = first_key(a.query_pos[qi], a.window) / kSeg;
    float* part = a.partials + ((qi * a.num_heads + h) * a.max_segments + (c.seg - qseg0)) * (c.hd + 2);
    part[f] = f == 0 ? m.mrow[r] : f == 1 ? m.lrow[r] : m.acc[static_cast<int64_t>(r) * c.hd + (f - 2)];
  }
}


}  // namespace hz::cuda::attn
