// The 8-row group driver of the Q4_K / Q5_K / Q6_K matmuls against Q8_K activations, shared by the AVX2
// (avx2/kquants.cc) and AVX-512 VNNI (avx512/matmul_q_vnni.cc) translation units, which differ only
// in the Dot policy (how 4 unsigned weight bytes x 4 signed activation bytes are summed into an
// int32 lane). Include only from files compiled with at least -mavx2 -mfma -mf16c.
//
// A super-block of 8 rows is decoded once (nibbles unpacked, transposed so that lane r of every
// vector is row r, scales widened) and then dotted with up to kTokenChunk activation rows: the
// unpacking that a row-at-a-time kernel repeats per token is paid once per 32 tokens.
//
// Arithmetic (the block-order rule, the same as ref::vec_dot_q4_k_q8_k / q6_k): per super-block the
// dot is an exact int32 (scales applied in integers), folded into one f32 accumulator per output by
// one fma per term in super-block order: acc = fma(d_w * d_x, float(isum), acc) and, for Q4_K,
// acc = fma(-(dmin_w * d_x), float(mins . bsums), acc). One token and many tokens, AVX2 and VNNI,
// all give the scalar reference's bits.
//
// NOTE: internal linkage only (anonymous namespace), as in matmul_q_groups.h: each TU keeps its own
// copy compiled with its own ISA flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/avx2/int_lanes.h"
#include "kernels/kernels.h"
#include "kernels/unaligned.h"

namespace hz::kernels::avx2 {
namespace {

namespace kq {

constexpr int kRows = 8;         // weight rows per group (one lane each)
constexpr int kTokenChunk = 32;  // tokens per pass over a group's decoded super-block


// 32 bytes at `off` of each of the 8 rows, transposed: v[k] lane r = dword k of row r.
inline void transpose_rows32(const uint8_t* const* rows, int64_t off, __m256i v[8]) {
  __m256i lo[4], hi[4];
  for (int r = 0; r < 4; ++r) {
    const __m256i x0 = load256(rows[r] + off), x1 = load256(rows[r + 4] + off);
    lo[r] = _mm256_permute2x128_si256(x0, x1, 0x20);
    hi[r] = _mm256_permute2x128_si256(x0, x1, 0x31);
  }
  transpose4_epi32(lo, v);
  transpose4_epi32(hi, v + 4);
}

// One f16 at `off` of each of the 8 rows, as f32 lanes.
inline __m256 row_f16s(const uint8_t* const* rows, int64_t off) {
  const __m128i h = _mm_setr_epi16(
      static_cast<int16_t>(load_u16(rows[0] + off)), static_cast<int16_t>(load_u16(rows[1] + off)),
      static_cast<int16_t>(load_u16(rows[2] + off)), static_cast<int16_t>(load_u16(rows[3] + off)),
      static_cast<int16_t>(load_u16(rows[4] + off)), static_cast<int16_t>(load_u16(rows[5] + off)),
      static_cast<int16_t>(load_u16(rows[6] + off)), static_cast<int16_t>(load_u16(rows[7] + off)));
  return _mm256_cvtph_ps(h);
}

// 8 x 16 bytes (u[r] = row r's 16 bytes) transposed by byte: out[j] bytes 0..7 = byte 2j of rows
// 0..7, bytes 8..15 = byte 2j+1 of rows 0..7 (j < 4: bytes 0..7 of the inputs; j >= 4: bytes 8..15).
inline void transpose8x16_bytes(const __m128i u[8], __m128i out[8]) {
  __m128i a[4], b[4];
  for (int k = 0; k < 4; ++k) {
    a[k] = _mm_unpacklo_epi8(u[2 * k], u[2 * k + 1]);  // bytes 0..7, row pairs
    b[k] = _mm_unpackhi_epi8(u[2 * k], u[2 * k + 1]);  // bytes 8..15
  }
  const __m128i* src[2] = {a, b};
  for (int h = 0; h < 2; ++h) {
    const __m128i* s = src[h];
    const __m128i c0 = _mm_unpacklo_epi16(s[0], s[1]), c1 = _mm_unpackhi_epi16(s[0], s[1]);
    const __m128i c2 = _mm_unpacklo_epi16(s[2], s[3]), c3 = _mm_unpackhi_epi16(s[2], s[3]);
    out[4 * h + 0] = _mm_unpacklo_epi32(c0, c2);
    out[4 * h + 1] = _mm_unpackhi_epi32(c0, c2);
    out[4 * h + 2] = _mm_unpacklo_epi32(c1, c3);
    out[4 * h + 3] = _mm_unpackhi_epi32(c1, c3);
  }
}

// ---- decoded super-blocks of 8 rows ----

// Q4_K: q[g][k] lane r = the 4 nibbles (0..15) of row r, elements 32g + 4k .. +3; sc[g] lane r =
// row r's 6-bit scale of group g (int32); mpair[j] lane r = (min 2j, min 2j+1) of row r as int16.
struct Q4KBlock {
  __m256i q[8][8];
  __m256i sc[8];
  __m256i mpair[4];
  __m256 d, dmin;
};

inline void decode_q4_k(const uint8_t* const* rows, int64_t b, Q4KBlock* w) {
  const int64_t off = b * static_cast<int64_t>(sizeof(BlockQ4_K));
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; ++c) {  // 64-element chunks: group 2c in low nibbles, 2c+1 in high nibbles
    __m256i t[8];
    transpose_rows32(rows, off + offsetof(BlockQ4_K, qs) + 32 * c, t);
    for (int k = 0; k < 8; ++k) {
      w->q[2 * c][k] = _mm256_and_si256(t[k], m4);
      w->q[2 * c + 1][k] = _mm256_and_si256(_mm256_srli_epi16(t[k], 4), m4);
    }
  }
  __m128i u[8], s[8];
  for (int r = 0; r < kRows; ++r) u[r] = unpack_scale_min(rows[r] + off + offsetof(BlockQ4_K, scales));
  transpose8x16_bytes(u, s);  // s[j]: scales 2j, 2j+1 (j < 4); s[4 + j]: mins 2j, 2j+1
  for (int j = 0; j < 4; ++j) {
    w->sc[2 * j] = _mm256_cvtepu8_epi32(s[j]);
    w->sc[2 * j + 1] = _mm256_cvtepu8_epi32(_mm_srli_si128(s[j], 8));
    w->mpair[j] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s[4 + j], _mm_srli_si128(s[4 + j], 8)));
  }
  w->d = row_f16s(rows, off + offsetof(BlockQ4_K, d));
  w->dmin = row_f16s(rows, off + offsetof(BlockQ4_K, dmin));
}

// Q5_K: as Q4_K with the 5th bit of element l of group g in bit g of qh[l] (q 0..31).
inline void decode_q5_k(const uint8_t* const* rows, int64_t b, Q4KBlock* w) {
  const int64_t off = b * static_cast<int64_t>(sizeof(BlockQ5_K));
  const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
  __m256i qh[8];
  transpose_rows32(rows, off + offsetof(BlockQ5_K, qh), qh);  // dword k: elements 4k..4k+3 of every group
  for (int c = 0; c < 4; ++c) {
    __m256i t[8];
    transpose_rows32(rows, off + offsetof(BlockQ5_K, qs) + 32 * c, t);
    for (int k = 0; k < 8; ++k) {
      // Bit g of each byte to bit 4 (the 16-bit shift moves bits across bytes; the mask keeps bit 0).
      const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[k], 2 * c), one), 4);
      const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[k], 2 * c + 1), one), 4);
      w->q[2 * c][k] = _mm256_or_si256(_mm256_and_si256(t[k], m4), h_lo);
      w->q[2 * c + 1][k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(t[k], 4), m4), h_hi);
    }
  }
  __m128i u[8], s[8];
  for (int r = 0; r < kRows; ++r) u[r] = unpack_scale_min(rows[r] + off + offsetof(BlockQ5_K, scales));
  transpose8x16_bytes(u, s);
  for (int j = 0; j < 4; ++j) {
    w->sc[2 * j] = _mm256_cvtepu8_epi32(s[j]);
    w->sc[2 * j + 1] = _mm256_cvtepu8_epi32(_mm_srli_si128(s[j], 8));
    w->mpair[j] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s[4 + j], _mm_srli_si128(s[4 + j], 8)));
  }
  w->d = row_f16s(rows, off + offsetof(BlockQ5_K, d));
  w->dmin = row_f16s(rows, off + offsetof(BlockQ5_K, dmin));
}

// Q6_K: q[g][k] lane r = the 4 unsigned 6-bit quants (0..63, i.e. q + 32) of row r, elements
// 16g + 4k .. +3; sc[g] lane r = row r's int8 scale of group g (int32); scpair[j] lane r =
// (scale 2j, scale 2j+1) as int16.
struct Q6KBlock {
  __m256i q[16][4];
  __m256i sc[16];
  __m256i scpair[8];
  __m256 d;
};

inline void decode_q6_k(const uint8_t* const* rows, int64_t b, Q6KBlock* w) {
  const int64_t off = b * static_cast<int64_t>(sizeof(BlockQ6_K));
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {  // 128-element halves: 64 ql bytes, 32 qh bytes
    __m256i qa[8], qb[8], qh[8];
    transpose_rows32(rows, off + offsetof(BlockQ6_K, ql) + 64 * h, qa);
    transpose_rows32(rows, off + offsetof(BlockQ6_K, ql) + 64 * h + 32, qb);
    transpose_rows32(rows, off + offsetof(BlockQ6_K, qh) + 32 * h, qh);
    for (int k = 0; k < 8; ++k) {
      // Chunk c (32 elements of the half) holds qh bits 2c..2c+1 as bits 4..5; byte-wise, so the
      // transposition commutes with it. Dword k of a chunk: elements 4k..4k+3, group k / 4.
      const __m256i c0 = _mm256_or_si256(_mm256_and_si256(qa[k], low4), _mm256_and_si256(_mm256_slli_epi16(qh[k], 4), bits45));
      const __m256i c1 = _mm256_or_si256(_mm256_and_si256(qb[k], low4), _mm256_and_si256(_mm256_slli_epi16(qh[k], 2), bits45));
      const __m256i c2 =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa[k], 4), low4), _mm256_and_si256(qh[k], bits45));
      const __m256i c3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb[k], 4), low4),
                                         _mm256_and_si256(_mm256_srli_epi16(qh[k], 2), bits45));
      const int g0 = 8 * h + k / 4, kk = k % 4;
      w->q[g0][kk] = c0;
      w->q[g0 + 2][kk] = c1;
      w->q[g0 + 4][kk] = c2;
      w->q[g0 + 6][kk] = c3;
    }
  }
  __m128i u[8], s[8];
  for (int r = 0; r < kRows; ++r) u[r] = load128(rows[r] + off + offsetof(BlockQ6_K, scales));
  transpose8x16_bytes(u, s);  // s[j]: scales 2j, 2j+1 of rows 0..7
  for (int j = 0; j < 8; ++j) {
    w->sc[2 * j] = _mm256_cvtepi8_epi32(s[j]);
    w->sc[2 * j + 1] = _mm256_cvtepi8_epi32(_mm_srli_si128(s[j], 8));
    w->scpair[j] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s[j], _mm_srli_si128(s[j], 8)));
  }
  w->d = row_f16s(rows, off + offsetof(BlockQ6_K, d));
}

// ---- the dots: Dot::dot4(acc, v, xdword) adds the 4 products of each lane's u8 weights with the
// activation's 4 s8 (broadcast dword) into the int32 lane; exact in both policies ----

// xq + 4k as a dword broadcast to all 8 lanes.
inline __m256i bcast(const int8_t* xq, int k) { return _mm256_set1_epi32(load_i32(reinterpret_cast<const uint8_t*>(xq) + 4 * k)); }

// Sum over one group of `Steps` dwords: int32 lane r = sum of row r's quants x the activations.
template <class Dot, int Steps>
inline __m256i group_dot(const __m256i* v, const int8_t* xq) {
  __m256i s0 = Dot::dot4(_mm256_setzero_si256(), v[0], bcast(xq, 0));
  __m256i s1 = Dot::dot4(_mm256_setzero_si256(), v[1], bcast(xq, 1));
  for (int k = 2; k < Steps; k += 2) {
    s0 = Dot::dot4(s0, v[k], bcast(xq, k));
    s1 = Dot::dot4(s1, v[k + 1], bcast(xq, k + 1));
  }
  return _mm256_add_epi32(s0, s1);
}

// The pair (bsum 2j, bsum 2j+1) of a Q8_K block (int16 each) broadcast as one dword.
inline __m256i bsum_pair(const uint8_t* xb, int j) {
  return _mm256_set1_epi32(load_i32(xb + offsetof(BlockQ8_K, bsums) + 4 * j));
}

// Q4_K (or Q5_K) x one Q8_K block: folds this super-block into acc (8 rows).
template <class Dot>
inline __m256 fold_q4_k(const Q4KBlock& w, const uint8_t* xb, __m256 acc) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(xb + offsetof(BlockQ8_K, qs));
  __m256i isum = _mm256_setzero_si256();
  for (int g = 0; g < 8; ++g) {
    isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(group_dot<Dot, 8>(w.q[g], xq + 32 * g), w.sc[g]));
  }
  // mins . (group sums), group sum g = bsums[2g] + bsums[2g+1]: dword j of the hadd holds the sums
  // of groups 2j and 2j+1, madd'ed with (min 2j, min 2j+1) of each row.
  const __m128i gsum = _mm_hadd_epi16(load128(xb + offsetof(BlockQ8_K, bsums)), load128(xb + offsetof(BlockQ8_K, bsums) + 16));
  alignas(16) int32_t gp[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(gp), gsum);
  __m256i msum = _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) msum = _mm256_add_epi32(msum, _mm256_madd_epi16(w.mpair[j], _mm256_set1_epi32(gp[j])));
  const float dx = load_f32(xb + offsetof(BlockQ8_K, d));
  const __m256 dxv = _mm256_set1_ps(dx);
  acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, dxv), _mm256_cvtepi32_ps(isum), acc);
  return _mm256_fmadd_ps(_mm256_xor_ps(_mm256_mul_ps(w.dmin, dxv), _mm256_set1_ps(-0.0f)), _mm256_cvtepi32_ps(msum), acc);
}

// Q6_K x one Q8_K block. Quants are u6 - 32: sum = sum_g sc_g * (u6 . x)_g - 32 * sum_g sc_g * bsum_g.
template <class Dot>
inline __m256 fold_q6_k(const Q6KBlock& w, const uint8_t* xb, __m256 acc) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(xb + offsetof(BlockQ8_K, qs));
  __m256i isum = _mm256_setzero_si256();
  for (int g = 0; g < 16; ++g) {
    isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(group_dot<Dot, 4>(w.q[g], xq + 16 * g), w.sc[g]));
  }
  __m256i off = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j) off = _mm256_add_epi32(off, _mm256_madd_epi16(w.scpair[j], bsum_pair(xb, j)));
  isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 5));
  const __m256 dxv = _mm256_set1_ps(load_f32(xb + offsetof(BlockQ8_K, d)));
  return _mm256_fmadd_ps(_mm256_mul_ps(w.d, dxv), _mm256_cvtepi32_ps(isum), acc);
}

struct Q4KKind {
  using W = Q4KBlock;
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ4_K);
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { decode_q4_k(rows, b, w); }
  template <class Dot>
  static __m256 fold(const W& w, const uint8_t* xb, __m256 acc) { return fold_q4_k<Dot>(w, xb, acc); }
};

struct Q5KKind {
  using W = Q4KBlock;
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ5_K);
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { decode_q5_k(rows, b, w); }
  template <class Dot>
  static __m256 fold(const W& w, const uint8_t* xb, __m256 acc) { return fold_q4_k<Dot>(w, xb, acc); }
};

struct Q6KKind {
  using W = Q6KBlock;
  static constexpr uint64_t kBlockBytes = sizeof(BlockQ6_K);
  static void decode(const uint8_t* const* rows, int64_t b, W* w) { decode_q6_k(rows, b, w); }
  template <class Dot>
  static __m256 fold(const W& w, const uint8_t* xb, __m256 acc) { return fold_q6_k<Dot>(w, xb, acc); }
};

// GGUF rows [row_begin, row_end) of w against num_tokens Q8_K rows of x: y[t * y_stride + r].
template <class K, class Dot>
void matmul_groups(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                   uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  if (row_end <= row_begin || num_tokens <= 0) return;
  const int64_t nb = n / kQK_K;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  alignas(32) float acc[kTokenChunk][kRows];
  alignas(32) typename K::W wd;
  const uint8_t* rows[kRows];
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenChunk) {
    const int64_t nt = num_tokens - t0 < kTokenChunk ? num_tokens - t0 : kTokenChunk;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int64_t nr = row_end - r0 < kRows ? row_end - r0 : kRows;
      // Rows past the range repeat the last one: their lanes are computed and dropped.
      for (int r = 0; r < kRows; ++r) rows[r] = wb + (r0 + (r < nr ? r : nr - 1)) * w_row_bytes;
      for (int64_t t = 0; t < nt; ++t) _mm256_store_ps(acc[t], _mm256_setzero_ps());
      for (int64_t b = 0; b < nb; ++b) {
        K::decode(rows, b, &wd);
        for (int64_t t = 0; t < nt; ++t) {
          const uint8_t* xb = xbase + (t0 + t) * x_row_bytes + b * static_cast<int64_t>(sizeof(BlockQ8_K));
          _mm256_store_ps(acc[t], K::template fold<Dot>(wd, xb, _mm256_load_ps(acc[t])));
        }
      }
      for (int64_t t = 0; t < nt; ++t) {
        float* yt = y + (t0 + t) * y_stride + r0;
        if (nr == kRows) {
          _mm256_storeu_ps(yt, _mm256_load_ps(acc[t]));
        } else {
          for (int64_t r = 0; r < nr; ++r) yt[r] = acc[t][r];
        }
      }
    }
  }
}

}  // namespace kq

}  // namespace
}  // namespace hz::kernels::avx2
