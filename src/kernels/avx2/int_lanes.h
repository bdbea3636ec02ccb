// Small integer-lane helpers of the quantized matmuls (avx2/matmul_q.cc, avx2/kquants.cc and, through
// the group headers, avx512/matmul_q_vnni.cc): unaligned loads, a 4x4 dword transpose, an exact
// int32 horizontal sum and the K-quant 6-bit scale/min unpacking. Include only from files compiled
// with at least -mavx2 -mfma -mf16c.
//
// NOTE: internal linkage only (anonymous namespace), like matmul_q_groups.h: each TU keeps its own
// copy compiled with its own ISA flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/unaligned.h"

namespace hz::kernels::avx2 {
namespace {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 4x4 transpose of 32-bit elements within each 128-bit lane: out[k] lane i = in[i] dword k.
inline void transpose4_epi32(const __m256i in[4], __m256i out[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(in[0], in[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(in[0], in[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(in[2], in[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(in[2], in[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// Exact int32 sum of the first `lanes` (4 or 8) lanes.
[[gnu::always_inline]] inline int32_t hsum_epi32(__m256i v, int lanes = 8) {
  __m128i s = _mm256_castsi256_si128(v);
  if (lanes == 8) s = _mm_add_epi32(s, _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The 12 packed bytes of a Q4_K / Q5_K super-block unpacked into 8 scales (bytes 0..7) and 8 mins
// (bytes 8..15), all 6-bit; see ref::k_scale_min for the layout.
[[gnu::always_inline]] inline __m128i unpack_scale_min(const uint8_t* packed) {
  const uint32_t u0 = static_cast<uint32_t>(load_i32(packed)), u1 = static_cast<uint32_t>(load_i32(packed + 4)),
                 u2 = static_cast<uint32_t>(load_i32(packed + 8));
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t mins_hi = ((u2 >> 4) & kLow4) | (((u1 >> 6) & kLow2) << 4);
  const uint32_t mins_lo = u1 & kLow6;
  const uint32_t scales_hi = (u2 & kLow4) | (((u0 >> 6) & kLow2) << 4);
  const uint32_t scales_lo = u0 & kLow6;
  return _mm_setr_epi32(static_cast<int>(scales_lo), static_cast<int>(scales_hi), static_cast<int>(mins_lo),
                        static_cast<int>(mins_hi));
}

}  // namespace
}  // namespace hz::kernels::avx2
