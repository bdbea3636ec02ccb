// AVX-512 VNNI kinds of the Q4_0/Q8_0 8-row group matmul (driver: avx2/matmul_q_groups.h). The only
// TU compiled with -mavx512f/bw/vl/vnni; reached only through dispatch after a CPU check.
// vpdpbusd multiplies unsigned bytes by signed bytes and adds each 4 products into an int32 lane
// with no int16 intermediate, so one instruction replaces maddubs + madd (+ the sign trick for
// Q8_0). Block dots stay exact int32, so every output is bit-identical to the AVX2 kernel and the
// scalar reference (same fma per block, in block order).
#include <immintrin.h>

#include <type_traits>

#include "base/check.h"
#include "kernels/avx2/kquant_quads.h"
#include "kernels/avx2/matmul_kq_groups.h"
#include "kernels/avx2/matmul_q_groups.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/avx512/zmm_lanes.h"

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "matmul_q_vnni.cc needs -mavx512vl -mavx512vnni (see the top-level CMakeLists.txt)"
#endif

namespace hz::kernels::avx2 {
namespace {

// xq + 4k as a dword broadcast to all 8 lanes (folds into the EVEX {1to8} memory operand).
inline __m256i bcast(const uint8_t* xq, int k) { return _mm256_set1_epi32(load_i32(xq + 4 * k)); }

// 8 dot-product steps over the dword pairs (v[k], x dword k), on two chains to hide the latency;
// `init` seeds the first chain with the kind's correction. Integer adds: the order is immaterial.
inline __m256i dot8(const __m256i v[8], const uint8_t* xq, __m256i init) {
  __m256i s0 = _mm256_dpbusd_epi32(init, v[0], bcast(xq, 0));
  __m256i s1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), v[1], bcast(xq, 1));
  for (int k = 2; k < 8; k += 2) {
    s0 = _mm256_dpbusd_epi32(s0, v[k], bcast(xq, k));
    s1 = _mm256_dpbusd_epi32(s1, v[k + 1], bcast(xq, k + 1));
  }
  return _mm256_add_epi32(s0, s1);
}

// ---- Q4_0: nibbles (0..15) are the unsigned operand; sum(w*x) = sum(nib*x) - 8*sum(x) ----
struct Q4_0VnniKind {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr bool kNeedsXSum = true;
  struct W {
    __m256i v[8];  // v[k] lane r = 4 nibbles of row r, elements 4k..4k+3 (decode_q4_0_rows)
    __m256 d;
  };
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { decode_q4_0_rows(rows, b, w->v, &w->d); }
  static void decode_packed(const uint8_t* p, W* w) { decode_q4_0_packed(p, w->v, &w->d); }
  static __m256i dot(const W& w, const uint8_t* xq, int32_t xsum8) {
    return dot8(w.v, xq, _mm256_set1_epi32(-xsum8));
  }
};

// ---- Q8_0: w + 128 (0..255, i.e. w xor 0x80) is the unsigned operand ----
// sum((w+128)*x) = sum(w*x) + 128*sum(x) = sum(w*x) + 16*xsum8. Each lane's 4 products stay below
// 255*128*4 in magnitude: exact in int32, and unlike the sign trick exact even for x = -128.
struct Q8_0VnniKind {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr bool kNeedsXSum = true;
  struct W {
    __m256i u[8];  // u[k] lane r = row r's quants 4k..4k+3, each + 128
    __m256 d;
  };
  static void bias(W* w) {
    const __m256i m = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k) w->u[k] = _mm256_xor_si256(w->u[k], m);
  }
  static void decode(const uint8_t* const* rows, int64_t b, W* w) {
    decode_q8_0_rows(rows, b, w->u, &w->d);
    bias(w);
  }
  static void decode_packed(const uint8_t* p, W* w) {
    decode_q8_0_packed(p, w->u, &w->d);
    bias(w);
  }
  static __m256i dot(const W& w, const uint8_t* xq, int32_t xsum8) {
    return dot8(w.u, xq, _mm256_set1_epi32(-16 * xsum8));
  }
};

// ---- Packed weights, two 8-row groups per 512-bit register ----
// Lanes 0-7 are group g's rows, lanes 8-15 group g+1's, so each instruction does the work of two
// of the 256-bit kernel's. Per lane the operations are the 256-bit kernel's (exact int32 block dot,
// d = d_w * d_x, acc = fma(d, isum, acc) in block order): bit-identical outputs.
using vnni::bcast_dword;
using vnni::join;
using vnni::join128;
using vnni::join256;

// Steps dot-product steps over the dword pairs (v[k], x dword k) on 16 lanes; `init` seeds the
// first chain. Chains 2 splits them over two dependency chains (one token's block alone waits on
// the vpdpbusd latency otherwise); Chains 1 is one chain and one add fewer, for several tokens a
// block, whose chains overlap. Integer adds: the order is immaterial.
template <int Steps, int Chains = 2>
inline __m512i dot_steps(const __m512i* v, const void* xq, __m512i init) {
  if constexpr (Chains == 1) {
    __m512i s = init;
    for (int k = 0; k < Steps; ++k) s = _mm512_dpbusd_epi32(s, v[k], bcast_dword(xq, k));
    return s;
  } else {
    __m512i s0 = _mm512_dpbusd_epi32(init, v[0], bcast_dword(xq, 0));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[1], bcast_dword(xq, 1));
    for (int k = 2; k < Steps; k += 2) {
      s0 = _mm512_dpbusd_epi32(s0, v[k], bcast_dword(xq, k));
      s1 = _mm512_dpbusd_epi32(s1, v[k + 1], bcast_dword(xq, k + 1));
    }
    return _mm512_add_epi32(s0, s1);
  }
}

// acc[t] (16 rows of token t0 + t) into y, for nt tokens and the nr rows that exist.
inline void store_pair_rows(const float (*acc)[2 * kGroup], int64_t nt, int64_t nr, float* y, int64_t y_stride,
                            int64_t t0, int64_t r0) {
  for (int64_t t = 0; t < nt; ++t) {
    float* yt = y + (t0 + t) * y_stride + r0;
    if (nr == 2 * kGroup) {
      _mm512_storeu_ps(yt, _mm512_load_ps(acc[t]));
    } else {
      for (int64_t r = 0; r < nr; ++r) yt[r] = acc[t][r];
    }
  }
}

// Bytes of each of the two groups requested ahead of the block in use. Two streams per pass, so
// further ahead than the one-group kernel: decode tg64 on llama-1b Q4_0 (Intel Xeon, 2 threads)
// gave 37 tok/s with no prefetch, 46.0 at 1024 bytes, 47.3 at 2048, 46.5 at 3072 (medians of 3).
constexpr int64_t kPairPrefetchAhead = 2048;

struct W2 {
  __m512i v[8];
  __m512 d;
};

// Block b of groups g (at p) and g+1 (at q) in the packed layout: 8 f16 scales, then the dwords.
struct Q4_0Pair {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ4_0);
  __attribute__((always_inline)) static void decode(const uint8_t* p, const uint8_t* q, W2* w) {
    const __m512i m = _mm512_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
      const __m512i t = join256(p + 16 + 32 * k, q + 16 + 32 * k);
      w->v[k] = _mm512_and_si512(t, m);
      w->v[4 + k] = _mm512_and_si512(_mm512_srli_epi16(t, 4), m);
    }
    w->d = _mm512_cvtph_ps(join128(p, q));
  }
  // Step j of 4: the weight vectors for activation dwords j and j + 4 (one 64-byte load).
  __attribute__((always_inline)) static void decode_two(const uint8_t* p, const uint8_t* q, int j, __m512i* a, int* ka,
                                                        __m512i* b, int* kb) {
    const __m512i m = _mm512_set1_epi8(0x0f);
    const __m512i t = join256(p + 16 + 32 * j, q + 16 + 32 * j);
    *a = _mm512_and_si512(t, m);
    *b = _mm512_and_si512(_mm512_srli_epi16(t, 4), m);
    *ka = j;
    *kb = j + 4;
  }
  template <int Chains>
  static __m512i dot(const W2& w, const uint8_t* xq, int32_t xsum8) {
    return dot_steps<8, Chains>(w.v, xq, init(xsum8));
  }
  // The dot's starting value: the weights are stored + 8, so 8 * the activations' sum comes off.
  static __m512i init(int32_t xsum8) { return _mm512_set1_epi32(-xsum8); }
};
struct Q8_0Pair {
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ8_0);
  __attribute__((always_inline)) static void decode(const uint8_t* p, const uint8_t* q, W2* w) {
    const __m512i m = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k) w->v[k] = _mm512_xor_si512(join256(p + 16 + 32 * k, q + 16 + 32 * k), m);
    w->d = _mm512_cvtph_ps(join128(p, q));
  }
  // Step j of 4: the weight vectors for activation dwords 2j and 2j + 1.
  __attribute__((always_inline)) static void decode_two(const uint8_t* p, const uint8_t* q, int j, __m512i* a, int* ka,
                                                        __m512i* b, int* kb) {
    const __m512i m = _mm512_set1_epi8(static_cast<char>(0x80));
    *a = _mm512_xor_si512(join256(p + 16 + 64 * j, q + 16 + 64 * j), m);
    *b = _mm512_xor_si512(join256(p + 48 + 64 * j, q + 48 + 64 * j), m);
    *ka = 2 * j;
    *kb = 2 * j + 1;
  }
  template <int Chains>
  static __m512i dot(const W2& w, const uint8_t* xq, int32_t xsum8) {
    return dot_steps<8, Chains>(w.v, xq, init(xsum8));
  }
  // The weights are stored + 128 (unsigned), so 128 * the activations' sum comes off.
  static __m512i init(int32_t xsum8) { return _mm512_set1_epi32(-16 * xsum8); }
};

// The lines kPairPrefetchAhead past block b of the pair at groups g and g + gb requested. Past the
// groups' end the look-ahead goes on in the same two groups of the next unit (`unit` groups on: 2
// for a pair, 4 for two pairs at once), the groups read next. Requesting instead the lines right
// after the pair's own groups (the other pair's, or the second group's own) left every unit's
// second half starting cold: decode on llama-1b Q4_0 (Zen 5, 2 threads) gained 8-10% from this
// (groups of 2048 columns are 9 KiB, so the cold start was a large part).
template <class K>
__attribute__((always_inline)) inline void prefetch_unit_pair(const uint8_t* g, uint64_t gb, uint64_t unit, int64_t b) {
  const uint64_t ahead = static_cast<uint64_t>(b) * kGroup * K::kBlockBytes + kPairPrefetchAhead;
  const uint8_t* p = ahead < gb ? g + ahead : g + unit * gb + (ahead - gb);
  for (uint64_t l = 0; l < kGroup * K::kBlockBytes; l += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + gb + l), _MM_HINT_T0);
  }
}
// Block b of that pair decoded into wd, its look-ahead requested.
template <class K>
__attribute__((always_inline)) inline void decode_unit_pair(const uint8_t* g, uint64_t gb, uint64_t unit, int64_t b,
                                                            W2* wd) {
  prefetch_unit_pair<K>(g, gb, unit, b);
  const uint64_t off = static_cast<uint64_t>(b) * kGroup * K::kBlockBytes;
  K::decode(g + off, g + gb + off, wd);
}
// Block b of groups g0 and g1 = g0 + a group's bytes (the packed layout), a pair on its own.
template <class K>
__attribute__((always_inline)) inline void decode_pair(const uint8_t* g0, const uint8_t* g1, int64_t b, W2* wd) {
  decode_unit_pair<K>(g0, static_cast<uint64_t>(g1 - g0), 2, b, wd);
}
// One token's block folded into acc: acc = fma(d_w * d_x, isum, acc), per lane as the 256-bit kernel.
template <class K, int Chains, class Cursor>
inline __m512 fold_pair(const W2& w, const Cursor& c, __m512 acc) {
  const __m512i isum = K::template dot<Chains>(w, c.qs(), c.sum8());
  return _mm512_fmadd_ps(_mm512_mul_ps(w.d, _mm512_set1_ps(c.d())), _mm512_cvtepi32_ps(isum), acc);
}

// Block b of NP pairs (pair i at groups g[i] and g[i] + gb) folded into acc[i][t] for NT tokens
// from the cursor x, step-major: each 64-byte step of the weights is decoded and used by every
// token before the next one (K::decode_two), so the NT x NP dot-product chains sit next to each
// other in program order and overlap, and only the step's weight registers are live (decoding the
// whole block first keeps 16, which beside the accumulators spill: faster in L2, slower from DRAM).
// Token by token the chains ran one after another, latency-bound: step-major, 5 tokens of a
// 256 x 2048 Q4_0 matrix take 0.84-0.92x the time in L2 and 0.90x from DRAM (Zen 5, 1 thread), a
// 5-token step on llama-1b 1.10-1.14x faster. The same integer dot per lane (exact, any order) and
// the same fma per block. Past kStepMajorMaxTokens tokens the float accumulators no longer fit in
// registers and the token-by-token order is as fast (two step-major halves: slower from DRAM).
constexpr int kStepMajorMaxTokens = 5;
template <class K, int NT, int NP>
__attribute__((always_inline)) inline void fold_block_steps(const uint8_t* const* g, uint64_t gb, int64_t b,
                                                            XChunks::Cursor x, __m512 (*acc)[NT]) {
  const uint64_t off = static_cast<uint64_t>(b) * kGroup * K::kBlockBytes;
  // One token a block has too few chains to hide the vpdpbusd latency: two per pair, as dot_steps.
  constexpr int C = NT <= 2 ? 2 : 1;
  __m512i s[C][NP][NT];
  for (int t = 0; t < NT; ++t) {
    for (int i = 0; i < NP; ++i) {
      s[0][i][t] = K::init(x.plus(t).sum8());
      if constexpr (C == 2) s[1][i][t] = _mm512_setzero_si512();
    }
  }
  for (int j = 0; j < 4; ++j) {
    __m512i u[NP], v[NP];
    int ku = 0, kv = 0;
    for (int i = 0; i < NP; ++i) K::decode_two(g[i] + off, g[i] + gb + off, j, &u[i], &ku, &v[i], &kv);
    for (int t = 0; t < NT; ++t) {
      const __m512i xb = bcast_dword(x.plus(t).qs(), ku);
      for (int i = 0; i < NP; ++i) s[0][i][t] = _mm512_dpbusd_epi32(s[0][i][t], u[i], xb);
    }
    for (int t = 0; t < NT; ++t) {
      const __m512i xb = bcast_dword(x.plus(t).qs(), kv);
      for (int i = 0; i < NP; ++i) s[C - 1][i][t] = _mm512_dpbusd_epi32(s[C - 1][i][t], v[i], xb);
    }
  }
  for (int i = 0; i < NP; ++i) {
    const __m512 d = _mm512_cvtph_ps(join128(g[i] + off, g[i] + gb + off));
    for (int t = 0; t < NT; ++t) {
      __m512i isum = s[0][i][t];
      if constexpr (C == 2) isum = _mm512_add_epi32(isum, s[1][i][t]);
      const __m512 xd = _mm512_set1_ps(x.plus(t).d());
      acc[i][t] = _mm512_fmadd_ps(_mm512_mul_ps(d, xd), _mm512_cvtepi32_ps(isum), acc[i][t]);
    }
  }
}

// NT tokens from t0, accumulators in registers (decode, speculative verification, small batches).
template <class K, int NT>
inline void pair_tokens(int64_t nb, const uint8_t* g0, const uint8_t* g1, const XChunks& x, int64_t t0, W2* wd,
                        float (*acc)[2 * kGroup]) {
  __m512 a[1][NT];
  for (int t = 0; t < NT; ++t) a[0][t] = _mm512_setzero_ps();
  const uint8_t* g[1] = {g0};
  const auto gb = static_cast<uint64_t>(g1 - g0);
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (NT <= kStepMajorMaxTokens) {
      prefetch_unit_pair<K>(g0, gb, 2, b);
      fold_block_steps<K, NT, 1>(g, gb, b, x.at(t0, b), a);
    } else {
      decode_pair<K>(g0, g1, b, wd);
      auto c = x.at(t0, b);
      for (int t = 0; t < NT; ++t, c.next()) a[0][t] = fold_pair<K, 1>(*wd, c, a[0][t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_store_ps(acc[t], a[0][t]);
}
template <class K, int NT = 1>
inline void pair_in_registers(int64_t nb, const uint8_t* g0, const uint8_t* g1, const XChunks& x, int64_t t0, int64_t nt,
                              W2* wd, float (*acc)[2 * kGroup]) {
  if constexpr (NT < kRegisterTokens) {
    if (nt != NT) return pair_in_registers<K, NT + 1>(nb, g0, g1, x, t0, nt, wd, acc);
  }
  pair_tokens<K, NT>(nb, g0, g1, x, t0, wd, acc);
}

// ---- Two pairs at once (32 rows), for up to kRegisterTokens tokens ----
// With a few tokens a block (decode, speculative verification, small decode batches) the pair
// kernel spent about as much on broadcasting each activation dword as on the dot products. Here
// each broadcast serves two pairs' registers, so there are half as many per dot product, and four
// weight streams are read at once. Per lane the operations are the pair kernel's (exact int32
// block dot, acc = fma(d_w * d_x, isum, acc) in block order): bit-identical outputs. Llama-1b Q4_0
// on Zen 5, 2 threads, against pairs: decode 1.05-1.10x, 2 tokens 1.15x, 5 tokens 1.14-1.20x,
// 8 tokens 1.08x.
constexpr int kPairQuadMinTokens = 1;
constexpr int kPairQuadMaxTokens = kRegisterTokens;

// NT tokens from t0 over the 4 groups at g0 (pairs g0, g0 + gb and g0 + 2gb, g0 + 3gb).
template <class K, int NT>
inline void quad_tokens(int64_t nb, const uint8_t* g0, uint64_t gb, const XChunks& x, int64_t t0,
                        float (*acc0)[2 * kGroup], float (*acc1)[2 * kGroup]) {
  __m512 a[2][NT];
  for (int t = 0; t < NT; ++t) a[0][t] = a[1][t] = _mm512_setzero_ps();
  const uint8_t* g[2] = {g0, g0 + 2 * gb};
  if constexpr (NT <= kStepMajorMaxTokens) {
    for (int64_t b = 0; b < nb; ++b) {
      prefetch_unit_pair<K>(g[0], gb, 4, b);
      prefetch_unit_pair<K>(g[1], gb, 4, b);
      fold_block_steps<K, NT, 2>(g, gb, b, x.at(t0, b), a);
    }
  } else {
    W2 w[2];
    for (int64_t b = 0; b < nb; ++b) {
      decode_unit_pair<K>(g[0], gb, 4, b, &w[0]);
      decode_unit_pair<K>(g[1], gb, 4, b, &w[1]);
      auto cur = x.at(t0, b);
      for (int t = 0; t < NT; ++t, cur.next()) {
        const uint8_t* xq = cur.qs();
        __m512i s0 = K::init(cur.sum8()), s1 = s0;
        for (int k = 0; k < 8; ++k) {
          const __m512i xb = bcast_dword(xq, k);
          s0 = _mm512_dpbusd_epi32(s0, w[0].v[k], xb);
          s1 = _mm512_dpbusd_epi32(s1, w[1].v[k], xb);
        }
        const __m512 xd = _mm512_set1_ps(cur.d());
        a[0][t] = _mm512_fmadd_ps(_mm512_mul_ps(w[0].d, xd), _mm512_cvtepi32_ps(s0), a[0][t]);
        a[1][t] = _mm512_fmadd_ps(_mm512_mul_ps(w[1].d, xd), _mm512_cvtepi32_ps(s1), a[1][t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    _mm512_store_ps(acc0[t], a[0][t]);
    _mm512_store_ps(acc1[t], a[1][t]);
  }
}
template <class K, int NT = kPairQuadMinTokens>
inline void quad_in_registers(int64_t nb, const uint8_t* g0, uint64_t gb, const XChunks& x, int64_t t0, int64_t nt,
                              float (*acc0)[2 * kGroup], float (*acc1)[2 * kGroup]) {
  if constexpr (NT < kPairQuadMaxTokens) {
    if (nt != NT) return quad_in_registers<K, NT + 1>(nb, g0, gb, x, t0, nt, acc0, acc1);
  }
  quad_tokens<K, NT>(nb, g0, gb, x, t0, acc0, acc1);
}

// Rows [row_begin, row_end) of packed weights, row_begin a multiple of 8 and at least 9 rows
// (two groups, the second possibly partial: the packed layout pads it to 8 rows).
template <class K>
void matmul_group_pairs(int64_t n, const uint8_t* packed, uint64_t group_bytes, int64_t row_begin, int64_t row_end,
                        const XChunks& x, int64_t num_tokens, float* y, int64_t y_stride) {
  const int64_t nb = n / kQK8_0;
  alignas(64) float acc[kTokenChunk][2 * kGroup];
  alignas(64) float acc1[kPairQuadMaxTokens][2 * kGroup];
  W2 wd;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenChunk) {
    const int64_t nt = num_tokens - t0 < kTokenChunk ? num_tokens - t0 : kTokenChunk;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += 2 * kGroup) {
      const int64_t nr = row_end - r0 < 2 * kGroup ? row_end - r0 : 2 * kGroup;
      const uint8_t* g0 = packed + (r0 / kGroup) * group_bytes;
      const uint8_t* g1 = g0 + group_bytes;
      if (nt >= kPairQuadMinTokens && nt <= kPairQuadMaxTokens && row_end - r0 > 3 * kGroup) {
        // Four groups, the last possibly partial (padded to 8 rows like every group).
        quad_in_registers<K>(nb, g0, group_bytes, x, t0, nt, acc, acc1);
        store_pair_rows(acc, nt, 2 * kGroup, y, y_stride, t0, r0);
        const int64_t nr1 = row_end - r0 - 2 * kGroup < 2 * kGroup ? row_end - r0 - 2 * kGroup : 2 * kGroup;
        store_pair_rows(acc1, nt, nr1, y, y_stride, t0, r0 + 2 * kGroup);
        r0 += 2 * kGroup;
        continue;
      }
      if (nt <= kRegisterTokens) {
        pair_in_registers<K>(nb, g0, g1, x, t0, nt, &wd, acc);
      } else {
        for (int64_t t = 0; t < nt; ++t) _mm512_store_ps(acc[t], _mm512_setzero_ps());
        for (int64_t b = 0; b < nb; ++b) {
          decode_pair<K>(g0, g1, b, &wd);
          auto c = x.at(t0, b);
          for (int64_t t = 0; t < nt; ++t, c.next()) _mm512_store_ps(acc[t], fold_pair<K, 1>(wd, c, _mm512_load_ps(acc[t])));
        }
      }
      store_pair_rows(acc, nt, nr, y, y_stride, t0, r0);
    }
  }
}

// ---- K-quants, two 8-row groups per 512-bit register ----
// Each group's super-block is decoded by the 256-bit decoder (kq::decode_*), the two are joined
// (lanes 0-7 group g, 8-15 group g+1) once per super-block, and every token's fold then runs on
// 512-bit registers with the 256-bit fold's operations per lane (exact int32 dots and scales, the
// same mul and fmas in super-block order): bit-identical outputs.
namespace kq2 {

inline __m512 negate(__m512 v) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

struct Q4KBlock2 {
  __m512i q[8][8];
  __m512i sc[8];
  __m512i mpair[4];
  __m512 d, dmin;
};
inline void join_q4_k(const kq::Q4KBlock& a, const kq::Q4KBlock& b, Q4KBlock2* w) {
  for (int g = 0; g < 8; ++g) {
    for (int k = 0; k < 8; ++k) w->q[g][k] = join(a.q[g][k], b.q[g][k]);
    w->sc[g] = join(a.sc[g], b.sc[g]);
  }
  for (int j = 0; j < 4; ++j) w->mpair[j] = join(a.mpair[j], b.mpair[j]);
  w->d = join(a.d, b.d);
  w->dmin = join(a.dmin, b.dmin);
}
// kq::fold_q4_k on 16 lanes.
inline __m512 fold_q4_k(const Q4KBlock2& w, const uint8_t* xb, __m512 acc) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(xb + offsetof(BlockQ8_K, qs));
  __m512i isum = _mm512_setzero_si512();
  for (int g = 0; g < 8; ++g) isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot_steps<8>(w.q[g], xq + 32 * g, _mm512_setzero_si512()), w.sc[g]));
  const __m128i gsum = _mm_hadd_epi16(load128(xb + offsetof(BlockQ8_K, bsums)), load128(xb + offsetof(BlockQ8_K, bsums) + 16));
  alignas(16) int32_t gp[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(gp), gsum);
  __m512i msum = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) msum = _mm512_add_epi32(msum, _mm512_madd_epi16(w.mpair[j], _mm512_set1_epi32(gp[j])));
  const __m512 dxv = _mm512_set1_ps(load_f32(xb + offsetof(BlockQ8_K, d)));
  acc = _mm512_fmadd_ps(_mm512_mul_ps(w.d, dxv), _mm512_cvtepi32_ps(isum), acc);
  return _mm512_fmadd_ps(negate(_mm512_mul_ps(w.dmin, dxv)), _mm512_cvtepi32_ps(msum), acc);
}

struct Q6KBlock2 {
  __m512i q[16][4];
  __m512i sc[16];
  __m512i scpair[8];
  __m512 d;
};
inline void join_q6_k(const kq::Q6KBlock& a, const kq::Q6KBlock& b, Q6KBlock2* w) {
  for (int g = 0; g < 16; ++g) {
    for (int k = 0; k < 4; ++k) w->q[g][k] = join(a.q[g][k], b.q[g][k]);
    w->sc[g] = join(a.sc[g], b.sc[g]);
  }
  for (int j = 0; j < 8; ++j) w->scpair[j] = join(a.scpair[j], b.scpair[j]);
  w->d = join(a.d, b.d);
}
// kq::fold_q6_k on 16 lanes.
inline __m512 fold_q6_k(const Q6KBlock2& w, const uint8_t* xb, __m512 acc) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(xb + offsetof(BlockQ8_K, qs));
  __m512i isum = _mm512_setzero_si512();
  for (int g = 0; g < 16; ++g) isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot_steps<4>(w.q[g], xq + 16 * g, _mm512_setzero_si512()), w.sc[g]));
  __m512i off = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) {
    off = _mm512_add_epi32(off, _mm512_madd_epi16(w.scpair[j], _mm512_set1_epi32(load_i32(xb + offsetof(BlockQ8_K, bsums) + 4 * j))));
  }
  isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(off, 5));
  const __m512 dxv = _mm512_set1_ps(load_f32(xb + offsetof(BlockQ8_K, d)));
  return _mm512_fmadd_ps(_mm512_mul_ps(w.d, dxv), _mm512_cvtepi32_ps(isum), acc);
}

struct Q4KPair {
  using W = kq::Q4KBlock;
  using W2 = Q4KBlock2;
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { kq::decode_q4_k(rows, b, w); }
  static void join(const W& a, const W& b, W2* w) { join_q4_k(a, b, w); }
  static __m512 fold(const W2& w, const uint8_t* xb, __m512 acc) { return fold_q4_k(w, xb, acc); }
};
struct Q5KPair {
  using W = kq::Q4KBlock;
  using W2 = Q4KBlock2;
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { kq::decode_q5_k(rows, b, w); }
  static void join(const W& a, const W& b, W2* w) { join_q4_k(a, b, w); }
  static __m512 fold(const W2& w, const uint8_t* xb, __m512 acc) { return fold_q4_k(w, xb, acc); }
};
struct Q6KPair {
  using W = kq::Q6KBlock;
  using W2 = Q6KBlock2;
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { kq::decode_q6_k(rows, b, w); }
  static void join(const W& a, const W& b, W2* w) { join_q6_k(a, b, w); }
  static __m512 fold(const W2& w, const uint8_t* xb, __m512 acc) { return fold_q6_k(w, xb, acc); }
};

// kq::matmul_groups over 16 rows at a time: rows [row_begin, row_end), at least 9 of them; rows
// past the range repeat the last one (computed and dropped), as there.
template <class K>
void matmul_group_pairs(int64_t n, const uint8_t* wb, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                        const uint8_t* xbase, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  constexpr int kRows2 = 2 * kq::kRows;
  const int64_t nb = n / kQK_K;
  alignas(64) float acc[kq::kTokenChunk][kRows2];
  alignas(64) typename K::W wa, wbk;
  alignas(64) typename K::W2 wd;
  const uint8_t* rows[kRows2];
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kq::kTokenChunk) {
    const int64_t nt = num_tokens - t0 < kq::kTokenChunk ? num_tokens - t0 : kq::kTokenChunk;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows2) {
      const int64_t nr = row_end - r0 < kRows2 ? row_end - r0 : kRows2;
      for (int r = 0; r < kRows2; ++r) rows[r] = wb + (r0 + (r < nr ? r : nr - 1)) * w_row_bytes;
      for (int64_t t = 0; t < nt; ++t) _mm512_store_ps(acc[t], _mm512_setzero_ps());
      for (int64_t b = 0; b < nb; ++b) {
        K::decode(rows, b, &wa);
        K::decode(rows + kq::kRows, b, &wbk);
        K::join(wa, wbk, &wd);
        for (int64_t t = 0; t < nt; ++t) {
          const uint8_t* xb = xbase + (t0 + t) * x_row_bytes + b * static_cast<int64_t>(sizeof(BlockQ8_K));
          _mm512_store_ps(acc[t], K::fold(wd, xb, _mm512_load_ps(acc[t])));
        }
      }
      store_pair_rows(acc, nt, nr, y, y_stride, t0, r0);
    }
  }
}

}  // namespace kq2

// ---- AMX (Intel Xeon from Sapphire Rapids): the int32 block dots of the packed group pairs by tile ----
// TDPBSUD multiplies signed bytes (A: the activations, one token per tile row, the 32 quants of a
// block) by unsigned bytes (B: row k holds the 16 rows' dword k, the very vectors the VNNI kernel
// feeds vpdpbusd) and sums them into int32 lanes. One tile op per block (K = 32: one scale per
// block) leaves the block's exact int32 dots of 16 rows by up to 16 tokens in C, so the 8
// vpdpbusd per token and block of the VNNI kernel become one tile op for all of them. The kind's
// correction, d = d_w * d_x and the fma in block order then run per token as there: bit-identical.
#define HZ_AMX __attribute__((target("amx-tile,amx-int8")))

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles: C (the int32 dots) 0-3, buffer u and half m (tokens 16m..16m+15) at 2u + m; A (the
// activations) 4-5 by half; B (the weights) 6-7 by buffer. Consecutive blocks alternate buffers,
// so one block's tile ops need not wait for the previous block's tiles to be stored.
inline TileConfig amx_tile_config(int64_t nt) {
  TileConfig c;
  const auto m0 = static_cast<uint8_t>(nt < 16 ? nt : 16);
  const auto m1 = static_cast<uint8_t>(nt - m0);
  for (int u = 0; u < 2; ++u) {
    c.rows[2 * u] = m0;
    c.colsb[2 * u] = 64;
    c.rows[2 * u + 1] = m1;
    c.colsb[2 * u + 1] = m1 > 0 ? 64 : 0;
    c.rows[6 + u] = 8;
    c.colsb[6 + u] = 64;
  }
  c.rows[4] = m0;
  c.colsb[4] = 32;
  c.rows[5] = m1;
  c.colsb[5] = m1 > 0 ? 32 : 0;
  return c;
}

// Q4_0: sum(w*x) = sum(nib*x) - 8*sum(x) = dots - sum8; Q8_0: sum((w+128)*x) - 16*sum8.
template <class K>
constexpr int32_t amx_xsum_scale() {
  return std::is_same_v<K, Q4_0Pair> ? 1 : 16;
}

// A software pipeline over the blocks, two stages apart, so that no step waits for the one before
// it on the same block: while block b is folded, block b + 1's tile ops run and block b + 2's
// weights are decoded into its B buffer. (One block at a time through store, tile load, tile op,
// tile store and load is a chain: 1.5x slower at 5 tokens.) Even so the tile work has a fixed cost
// per block of about 16 ns, so dispatch sends only matmuls of 16 tokens or more here.
constexpr int kAmxRing = 4;

// Block blk's dots of tokens 16m.. (tile TC, activations in tile TA) from B tile TB.
#define HZ_AMX_DOTS(TB, TA, TC, m, blk)                                                              \
  do {                                                                                             \
    _tile_loadd(TA, x.at(t0 + 16 * (m), blk).qs(), kPackedActivationEntryBytes);                   \
    _tile_zero(TC);                                                                                \
    _tile_dpbsud(TC, TA, TB);                                                                      \
    _tile_stored(TC, cbuf[(blk) % kAmxRing][16 * (m)], 64);                                        \
  } while (0)

// One token's block dots (a cbuf row) folded into acc, as fold_pair.
template <class K, class Cursor>
inline __m512 fold_amx(const int32_t* dots, __m512 dw, const Cursor& c, __m512 acc) {
  const __m512i isum = _mm512_add_epi32(_mm512_load_si512(dots), _mm512_set1_epi32(-amx_xsum_scale<K>() * c.sum8()));
  return _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(c.d())), _mm512_cvtepi32_ps(isum), acc);
}

// One pair of groups (g0, g1) against tokens [t0, t0 + nt), nt <= kTokenChunk, accumulated in acc
// (dispatch sends 16 tokens or more here, past what registers hold). The tile configuration is loaded.
template <class K>
HZ_AMX inline void pair_amx(int64_t nb, const uint8_t* g0, const uint8_t* g1, const XChunks& x, int64_t t0, int64_t nt,
                            float (*acc)[2 * kGroup]) {
  alignas(64) int32_t bbuf[kAmxRing][8][2 * kGroup];
  alignas(64) int32_t cbuf[kAmxRing][kTokenChunk][2 * kGroup];
  __m512 d[kAmxRing];
  W2 wd;
  const bool two_halves = nt > 16;
  for (int64_t t = 0; t < nt; ++t) _mm512_store_ps(acc[t], _mm512_setzero_ps());
  auto decode = [&](int64_t blk) {
    decode_pair<K>(g0, g1, blk, &wd);
    for (int k = 0; k < 8; ++k) _mm512_store_si512(bbuf[blk % kAmxRing][k], wd.v[k]);
    d[blk % kAmxRing] = wd.d;
  };
  auto fold = [&](int64_t blk) {
    auto c = x.at(t0, blk);
    const int32_t(*dots)[2 * kGroup] = cbuf[blk % kAmxRing];
    const __m512 dw = d[blk % kAmxRing];
    for (int64_t t = 0; t < nt; ++t, c.next()) _mm512_store_ps(acc[t], fold_amx<K>(dots[t], dw, c, _mm512_load_ps(acc[t])));
  };
  // Stage 1 of block b is its decode, stage 2 its tile ops, stage 3 its fold; step s runs stage 1
  // of block s, 2 of s - 1 and 3 of s - 2.
  for (int64_t s = 0; s < nb + 2; ++s) {
    if (s < nb) decode(s);
    const int64_t b2 = s - 1;
    if (b2 >= 0 && b2 < nb) {
      if ((b2 & 1) == 0) {
        _tile_loadd(6, bbuf[b2 % kAmxRing], 64);
        HZ_AMX_DOTS(6, 4, 0, 0, b2);
        if (two_halves) HZ_AMX_DOTS(6, 5, 1, 1, b2);
      } else {
        _tile_loadd(7, bbuf[b2 % kAmxRing], 64);
        HZ_AMX_DOTS(7, 4, 2, 0, b2);
        if (two_halves) HZ_AMX_DOTS(7, 5, 3, 1, b2);
      }
    }
    if (s >= 2) fold(s - 2);
  }
}
#undef HZ_AMX_DOTS

// matmul_group_pairs with the block dots on AMX tiles.
template <class K>
HZ_AMX void matmul_group_pairs_amx(int64_t n, const uint8_t* packed, uint64_t group_bytes, int64_t row_begin,
                                   int64_t row_end, const XChunks& x, int64_t num_tokens, float* y, int64_t y_stride) {
  const int64_t nb = n / kQK8_0;
  alignas(64) float acc[kTokenChunk][2 * kGroup];
  int64_t configured = 0;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenChunk) {
    const int64_t nt = num_tokens - t0 < kTokenChunk ? num_tokens - t0 : kTokenChunk;
    if (nt != configured) {
      const TileConfig cfg = amx_tile_config(nt);
      _tile_loadconfig(&cfg);
      configured = nt;
    }
    for (int64_t r0 = row_begin; r0 < row_end; r0 += 2 * kGroup) {
      const int64_t nr = row_end - r0 < 2 * kGroup ? row_end - r0 : 2 * kGroup;
      const uint8_t* g0 = packed + (r0 / kGroup) * group_bytes;
      pair_amx<K>(nb, g0, g0 + group_bytes, x, t0, nt, acc);
      store_pair_rows(acc, nt, nr, y, y_stride, t0, r0);
    }
  }
  _tile_release();
}


// Where the pair kernels' rows end in [row_begin, row_end) (more than 8 rows): whole pairs of
// 8-row groups, and a last pair with a partial second group when more than 8 rows are left; the
// 256-bit kernels take the rest, one group of at most 8 rows.
inline int64_t pairs_end(int64_t row_begin, int64_t row_end) {
  const int64_t rest = (row_end - row_begin) % (2 * kGroup);
  return rest == 0 || rest > kGroup ? row_end : row_end - rest;
}

// The k-quant group kernels' dot: vpdpbusd (exact int32, the same sums as the AVX2 maddubs pair).
struct VnniDot {
  static __m256i dot4(__m256i acc, __m256i v, __m256i x) { return _mm256_dpbusd_epi32(acc, v, x); }
};

}  // namespace
}  // namespace hz::kernels::avx2

namespace hz::kernels::vnni {

namespace {

// kWide: pairs of 8-row groups on 512-bit registers, an odd group left over on the 256-bit kernel;
// otherwise every group on the 256-bit kernel. Up to kFewMax tokens the few-token kernel instead.
template <bool kWide, int64_t kFewMax>
void kquant_impl(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                 const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK_K == 0);
  if (num_tokens <= kFewMax) {
    // Decode and few-token steps: 512-bit VNNI dots (kquant_decode.cc), or on 256-bit registers the
    // AVX2 few-token kernel, here with 32 vector registers (no spills).
    if constexpr (kWide) return matmul_kquant_few(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    switch (wtype) {
      case DType::kQ4_K:
        return avx2::matmul_quads<avx2::Q4_KKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                                  y_stride);
      case DType::kQ5_K:
        return avx2::matmul_quads<avx2::Q5_KKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                                  y_stride);
      case DType::kQ6_K:
        return avx2::matmul_quads<avx2::Q6_KKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                                  y_stride);
      default:
        HZ_CHECK_MSG(false, "vnni::matmul_kquant: not a k-quant");
    }
  }
  if (kWide && row_end - row_begin > avx2::kq::kRows) {
    const int64_t split = avx2::pairs_end(row_begin, row_end);
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    switch (wtype) {
      case DType::kQ4_K:
        avx2::kq2::matmul_group_pairs<avx2::kq2::Q4KPair>(n, wb, w_row_bytes, row_begin, split, xb, x_row_bytes, num_tokens, y, y_stride);
        break;
      case DType::kQ5_K:
        avx2::kq2::matmul_group_pairs<avx2::kq2::Q5KPair>(n, wb, w_row_bytes, row_begin, split, xb, x_row_bytes, num_tokens, y, y_stride);
        break;
      case DType::kQ6_K:
        avx2::kq2::matmul_group_pairs<avx2::kq2::Q6KPair>(n, wb, w_row_bytes, row_begin, split, xb, x_row_bytes, num_tokens, y, y_stride);
        break;
      default:
        HZ_CHECK_MSG(false, "vnni::matmul_kquant: not a k-quant");
    }
    if (split == row_end) return;
    row_begin = split;
  }
  switch (wtype) {
    case DType::kQ4_K:
      return avx2::kq::matmul_groups<avx2::kq::Q4KKind, avx2::VnniDot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes,
                                                                      num_tokens, y, y_stride);
    case DType::kQ5_K:
      return avx2::kq::matmul_groups<avx2::kq::Q5KKind, avx2::VnniDot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes,
                                                                      num_tokens, y, y_stride);
    case DType::kQ6_K:
      return avx2::kq::matmul_groups<avx2::kq::Q6KKind, avx2::VnniDot>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes,
                                                                      num_tokens, y, y_stride);
    default:
      HZ_CHECK_MSG(false, "vnni::matmul_kquant: not a k-quant");
  }
}

}  // namespace

void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  kquant_impl<true, kKquantFewTokens>(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                      y_stride);
}

void matmul_kquant_ymm(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                       const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  kquant_impl<false, kKquantFewTokensYmm>(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                          y_stride);
}

void matmul_kquant_split(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin,
                         int64_t row_end, const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y,
                         int64_t y_stride) {
  if (num_tokens <= kKquantFewTokensYmm) {
    return matmul_kquant_ymm(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
  }
  kquant_impl<true, avx2::kGroupMinTokens - 1>(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens,
                                               y, y_stride);
}

void matmul_q4_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK4_0 == 0);
  avx2::matmul_rows<avx2::Q4_0VnniKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

void matmul_q8_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  HZ_CHECK(n % kQK8_0 == 0);
  avx2::matmul_rows<avx2::Q8_0VnniKind>(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

namespace {

// kWide as in kquant_impl; kAmx: the pairs of groups on AMX tiles (the last group of at most 8
// rows stays on the 256-bit kernel either way).
template <bool kWide, bool kAmx = false>
void packed_impl(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                 int64_t num_tokens, float* y, int64_t y_stride) {
  static_assert(kWide || !kAmx);
  HZ_CHECK(row_begin % avx2::kGroup == 0 && n % kQK8_0 == 0);
  if (row_end <= row_begin || num_tokens <= 0) return;
  const uint64_t group_bytes = packed_group_bytes(wtype, n);
  if (kWide && row_end - row_begin > avx2::kGroup) {
    const int64_t split = avx2::pairs_end(row_begin, row_end);
    const avx2::XChunks xc{static_cast<const uint8_t*>(x), n / kQK8_0};
    const auto* p = static_cast<const uint8_t*>(packed);
    const auto pairs = [&]<class K>() {
      if constexpr (kAmx) {
        avx2::matmul_group_pairs_amx<K>(n, p, group_bytes, row_begin, split, xc, num_tokens, y, y_stride);
      } else {
        avx2::matmul_group_pairs<K>(n, p, group_bytes, row_begin, split, xc, num_tokens, y, y_stride);
      }
    };
    if (wtype == DType::kQ4_0) {
      pairs.template operator()<avx2::Q4_0Pair>();
    } else if (wtype == DType::kQ8_0) {
      pairs.template operator()<avx2::Q8_0Pair>();
    } else {
      HZ_CHECK_MSG(false, "vnni::matmul_packed: unsupported weight dtype");
    }
    if (split == row_end) return;
    row_begin = split;
  }
  switch (wtype) {
    case DType::kQ4_0:
      return avx2::matmul_packed_kind<avx2::Q4_0VnniKind>(n, packed, row_begin, row_end, x, num_tokens, y, y_stride,
                                                          group_bytes);
    case DType::kQ8_0:
      return avx2::matmul_packed_kind<avx2::Q8_0VnniKind>(n, packed, row_begin, row_end, x, num_tokens, y, y_stride,
                                                          group_bytes);
    default:
      HZ_CHECK_MSG(false, "vnni::matmul_packed: unsupported weight dtype");
  }
}

}  // namespace

void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride) {
  packed_impl<true>(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
}

void matmul_packed_ymm(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                       int64_t num_tokens, float* y, int64_t y_stride) {
  packed_impl<false>(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
}

void matmul_packed_amx(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                       int64_t num_tokens, float* y, int64_t y_stride) {
  packed_impl<true, true>(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
}

}  // namespace hz::kernels::vnni
