// Paged causal attention over the block-descriptor table: one CTA per (query block, KV head,
// 512-position segment) runs an online softmax over 32-key tiles, writing one partial per query
// head; a second kernel merges each query's segment partials in position order.
//
// Exactness rule: every value a query's result depends on is computed by a loop whose order is
// fixed by positions alone (keys in increasing order, dims in increasing order, segments in order),
// never by which thread computes it or how many queries share the CTA. So decode (query blocks of
// one) and prefill (blocks of consecutive queries) agree bit for bit, as do any batch and chunking.
// Correct first: K/V codes are staged in shared memory as f32 (exact) with their scales, tile by
// tile. The chunked kernel (attention_chunked.cu, the default) computes the same values in a
// schedule with fewer barriers; this one runs under HORIZON_CUDA_ATTENTION=simple.
#include <atomic>
#include <cfloat>

#include "kernels/cuda/attention_lanes.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/launch.h"

namespace hz::cuda {
namespace {

using kernels::KvCodec;
constexpr int kThreads = kAttnThreads;
constexpr int kTile = kAttnTileTokens;
constexpr int64_t kSeg = kAttnSegmentTokens;

// Positions and stored elements as the chunked kernel reads them (attention_lanes.h).
using attn::first_key;
using attn::grouped;
using attn::raw_code;
using attn::row_elem_bytes;

__global__ void __launch_bounds__(kThreads) paged_attention_kernel(PagedAttnArgs a) {
  extern __shared__ float smem[];
  const int64_t hd = a.head_dim;
  const int32_t group = a.num_heads / a.num_kv_heads;
  const int32_t kvh = blockIdx.y;
  const int32_t q_begin = a.qblock_first[blockIdx.x];
  const int32_t nq = a.qblock_first[blockIdx.x + 1] - q_begin;
  const int32_t rows = nq * group;
  const int32_t seq = a.query_seq[q_begin];
  const int64_t ngroups = (hd + 31) / 32;  // scale groups per row (one group when head_dim < 32)
  const int64_t glen = hd < 32 ? hd : 32;

  // This CTA's segment: the block's lowest first segment + blockIdx.z.
  int64_t seg_lo = INT64_MAX, seg_hi = -1, pos_max = -1;
  for (int32_t i = 0; i < nq; ++i) {
    const int64_t p = a.query_pos[q_begin + i];
    seg_lo = min(seg_lo, first_key(p, a.window) / kSeg);
    seg_hi = max(seg_hi, p / kSeg);
    pos_max = max(pos_max, p);
  }
  const int64_t seg = seg_lo + blockIdx.z;
  if (seg > seg_hi) return;  // uniform across the CTA
  const int64_t seg_k0 = seg * kSeg, seg_k1 = seg_k0 + kSeg;

  const int32_t max_rows = a.qblock_size * group;
  float* qs = smem;                               // [max_rows][hd]
  float* acc = qs + max_rows * hd;                // [max_rows][hd]
  float* pt = acc + max_rows * hd;                // [max_rows][kTile]
  float* mrow = pt + max_rows * kTile;            // [max_rows]
  float* lrow = mrow + max_rows;                  // [max_rows]
  float* alpha = lrow + max_rows;                 // [max_rows]
  // K codes one float apart from row to row (a stride of hd + 1): the score loop's threads read the
  // same dim of 32 different keys, which a stride of hd (a multiple of 32 banks) would put in one bank.
  const int64_t kst = hd + 1;
  float* kraw = alpha + max_rows;                 // [kTile][hd + 1]
  float* vraw = kraw + kTile * kst;               // [kTile][hd]
  float* kscale = vraw + kTile * hd;              // [kTile][ngroups]
  float* vscale = kscale + kTile * ngroups;       // [kTile][ngroups]
  __shared__ int64_t rk0[kAttnMaxRows], rk1[kAttnMaxRows];  // each row's keys in this segment

  for (int32_t r = threadIdx.x; r < rows; r += kThreads) {
    const int64_t p = a.query_pos[q_begin + r / group];
    const int64_t fk = first_key(p, a.window);
    const int64_t k0 = max(seg_k0, fk), k1 = min(seg_k1, p + 1);
    rk0[r] = k0;
    rk1[r] = k1 > k0 ? k1 : k0;  // empty when this segment is outside the query's keys
    mrow[r] = -INFINITY;
    lrow[r] = 0.0f;
  }
  for (int64_t i = threadIdx.x; i < static_cast<int64_t>(rows) * hd; i += kThreads) {
    const int64_t r = i / hd, d = i % hd;
    const int64_t qi = q_begin + r / group;
    const int64_t h = static_cast<int64_t>(kvh) * group + r % group;
    qs[i] = __fmul_rn(a.q[(qi * a.num_heads + h) * hd + d], a.scale);
    acc[i] = 0.0f;
  }
  __syncthreads();

  int64_t cta_k0 = seg_k1, cta_k1 = seg_k0;
  for (int32_t r = 0; r < rows; ++r) {
    if (rk1[r] > rk0[r]) {
      cta_k0 = min(cta_k0, rk0[r]);
      cta_k1 = max(cta_k1, rk1[r]);
    }
  }
  const device::DeviceKvBlock* table = a.blocks + a.seq_block_begin[seq];
  for (int64_t t0 = cta_k0 / kTile * kTile; t0 < cta_k1; t0 += kTile) {
    // Stage the tile's K and V codes (f32, exact) and their per-row scales.
    for (int64_t i = threadIdx.x; i < kTile * hd; i += kThreads) {
      const int64_t j = i / hd, d = i % hd, key = t0 + j;
      if (key < cta_k0 || key >= cta_k1) continue;
      const device::DeviceKvBlock& blk = table[key / a.block_tokens];
      const auto c = static_cast<KvCodec>(blk.codec);
      const int64_t row = static_cast<int64_t>(kvh) * a.block_tokens + key % a.block_tokens;
      const int64_t off = row * row_elem_bytes(c, hd);
      kraw[j * kst + d] = raw_code(c, a.arena + blk.k_elems + a.layer_offset + off, d);
      vraw[i] = raw_code(c, a.arena + blk.v_elems + a.layer_offset + off, d);
      if (d < ngroups) {
        float ks = 1.0f, vs = 1.0f;
        if (grouped(c)) {
          const int64_t so = (row * ngroups + d) * 2;
          ks = detail::f16_to_f32(detail::load_u16(a.arena + blk.k_scales + a.layer_offset + so));
          vs = detail::f16_to_f32(detail::load_u16(a.arena + blk.v_scales + a.layer_offset + so));
        } else if (c == KvCodec::kFp8) {  // one f32 per row (device/kv_block_desc.h)
          ks = detail::load_f32(a.arena + blk.k_scales + a.layer_offset + row * 4);
          vs = detail::load_f32(a.arena + blk.v_scales + a.layer_offset + row * 4);
        }
        kscale[j * ngroups + d] = ks;
        vscale[j * ngroups + d] = vs;
      }
    }
    __syncthreads();
    // Scores of every (row, key) of the tile that the row sees.
    for (int32_t i = threadIdx.x; i < rows * kTile; i += kThreads) {
      const int32_t r = i / kTile, j = i % kTile;
      const int64_t key = t0 + j;
      if (key < rk0[r] || key >= rk1[r]) continue;
      const auto c = static_cast<KvCodec>(table[key / a.block_tokens].codec);
      const float* qr = qs + static_cast<int64_t>(r) * hd;
      const float* kr = kraw + static_cast<int64_t>(j) * kst;
      float s = 0.0f;
      if (grouped(c)) {
        for (int64_t gi = 0; gi < ngroups; ++gi) {
          float t = 0.0f;
          const int64_t e = min(hd, (gi + 1) * glen);
          for (int64_t d = gi * glen; d < e; ++d) t = __fmaf_rn(qr[d], kr[d], t);
          s = __fmaf_rn(kscale[j * ngroups + gi], t, s);
        }
      } else {
        for (int64_t d = 0; d < hd; ++d) s = __fmaf_rn(qr[d], kr[d], s);
        if (c == KvCodec::kFp8) s = __fmul_rn(s, kscale[j * ngroups]);
      }
      pt[r * kTile + j] = s;
    }
    __syncthreads();
    // Online softmax state per row.
    for (int32_t r = threadIdx.x; r < rows; r += kThreads) {
      const int64_t j0 = max(t0, rk0[r]) - t0, j1 = min(t0 + kTile, rk1[r]) - t0;
      if (j1 <= j0) {
        alpha[r] = 1.0f;
        continue;
      }
      float mt = -INFINITY;
      for (int64_t j = j0; j < j1; ++j) mt = fmaxf(mt, pt[r * kTile + j]);
      const float mn = fmaxf(mrow[r], mt);
      const float al = expf(__fsub_rn(mrow[r], mn));
      float sum = 0.0f;
      for (int64_t j = j0; j < j1; ++j) {
        const float p = expf(__fsub_rn(pt[r * kTile + j], mn));
        pt[r * kTile + j] = p;
        sum = __fadd_rn(sum, p);
      }
      lrow[r] = __fmaf_rn(lrow[r], al, sum);
      mrow[r] = mn;
      alpha[r] = al;
    }
    __syncthreads();
    // acc = acc * alpha + sum over keys in order of p * v (scale folded into the coefficient).
    for (int64_t i = threadIdx.x; i < static_cast<int64_t>(rows) * hd; i += kThreads) {
      const int32_t r = static_cast<int32_t>(i / hd);
      const int64_t d = i % hd;
      const int64_t j0 = max(t0, rk0[r]) - t0, j1 = min(t0 + kTile, rk1[r]) - t0;
      if (j1 <= j0) continue;
      float v = __fmul_rn(acc[i], alpha[r]);
      for (int64_t j = j0; j < j1; ++j) {
        const auto c = static_cast<KvCodec>(table[(t0 + j) / a.block_tokens].codec);
        float coef = pt[r * kTile + j];
        if (grouped(c)) coef = __fmul_rn(coef, vscale[j * ngroups + d / glen]);
        if (c == KvCodec::kFp8) coef = __fmul_rn(coef, vscale[j * ngroups]);
        v = __fmaf_rn(coef, vraw[j * hd + d], v);
      }
      acc[i] = v;
    }
    __syncthreads();
  }
  // One partial per (query, head): [max, sum, acc[hd]] at the query's own segment index.
  for (int64_t i = threadIdx.x; i < static_cast<int64_t>(rows) * (hd + 2); i += kThreads) {
    const int32_t r = static_cast<int32_t>(i / (hd + 2));
    const int64_t f = i % (hd + 2);
    if (rk1[r] <= rk0[r]) continue;
    const int64_t qi = q_begin + r / group;
    const int64_t h = static_cast<int64_t>(kvh) * group + r % group;
    const int64_t qseg0 = first_key(a.query_pos[qi], a.window) / kSeg;
    float* part = a.partials + ((qi * a.num_heads + h) * a.max_segments + (seg - qseg0)) * (hd + 2);
    part[f] = f == 0 ? mrow[r] : f == 1 ? lrow[r] : acc[static_cast<int64_t>(r) * hd + (f - 2)];
  }
}

// out = sum_s acc_s * e^(m_s - M) / sum_s l_s * e^(m_s - M), segments in position order.
__global__ void merge_kernel(PagedAttnArgs a) {
  const int64_t qi = blockIdx.x;
  const int64_t h = blockIdx.y;
  const int64_t hd = a.head_dim;
  const int64_t p = a.query_pos[qi];
  const int64_t nseg = p / kSeg - first_key(p, a.window) / kSeg + 1;
  const float* parts = a.partials + (qi * a.num_heads + h) * a.max_segments * (hd + 2);
  float m = -INFINITY;
  for (int64_t s = 0; s < nseg; ++s) m = fmaxf(m, parts[s * (hd + 2)]);
  float l = 0.0f;
  for (int64_t s = 0; s < nseg; ++s) l = __fmaf_rn(parts[s * (hd + 2) + 1], expf(__fsub_rn(parts[s * (hd + 2)], m)), l);
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float o = 0.0f;
    for (int64_t s = 0; s < nseg; ++s) o = __fmaf_rn(parts[s * (hd + 2) + 2 + d], expf(__fsub_rn(parts[s * (hd + 2)], m)), o);
    a.out[(qi * a.num_heads + h) * hd + d] = __fdiv_rn(o, l);
  }
}

}  // namespace

namespace raw {

int paged_attention(const PagedAttnArgs& a, int64_t smem_bytes, AttentionKernel kernel, void* stream) {
  const auto smem = static_cast<size_t>(smem_bytes);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (kernel == AttentionKernel::kChunked) {
    if (int e = paged_attention_chunked_ctas(a, smem_bytes, stream); e != 0) return e;
    const dim3 mgrid(static_cast<uint32_t>(a.num_queries), static_cast<uint32_t>(a.num_heads));
    merge_kernel<<<mgrid, 128, 0, st>>>(a);
    return static_cast<int>(cudaGetLastError());
  }
  // The kernel's dynamic shared memory limit, raised once to the most any launch asked for: a
  // launch being captured into a CUDA graph then makes no call other than the launches.
  static std::atomic<size_t> smem_limit{0};
  if (smem > smem_limit.load()) {
    if (cudaError_t e = cudaFuncSetAttribute(paged_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        e != cudaSuccess) {
      return static_cast<int>(e);
    }
    size_t seen = smem_limit.load();
    while (seen < smem && !smem_limit.compare_exchange_weak(seen, smem)) {
    }
  }
  const dim3 grid(static_cast<uint32_t>(a.num_qblocks), static_cast<uint32_t>(a.num_kv_heads), static_cast<uint32_t>(a.max_segments));
  paged_attention_kernel<<<grid, kThreads, smem, st>>>(a);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return static_cast<int>(e);
  const dim3 mgrid(static_cast<uint32_t>(a.num_queries), static_cast<uint32_t>(a.num_heads));
  merge_kernel<<<mgrid, 128, 0, st>>>(a);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace raw
}  // namespace hz::cuda
