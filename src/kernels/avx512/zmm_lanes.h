// Helpers of the avx512/ kernels, which hold two 256-bit kernels' lanes in one 512-bit register
// (lanes 0-7 one row or group, lanes 8-15 the next): joining halves, splitting them, broadcasting
// 8 values or a dword to both. Include only from avx512/ files (compiled with -mavx512f and the
// others of the top-level CMakeLists.txt).
//
// NOTE: internal linkage only (anonymous namespace), like avx2/int_lanes.h.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/unaligned.h"

// GCC 12's 512-bit insert/extract/broadcast intrinsics start from _mm512_undefined_*(), which it then
// reports as used uninitialized where they are inlined: silenced in the files that include this.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // GCC's own group (clang, which builds the fuzz targets, has no such group)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Tile loops whose accumulators must stay in registers: GCC's own limits stop short of unrolling
// some tile shapes completely.
#define HZ_UNROLL _Pragma("GCC unroll 32")

namespace hz::kernels::vnni {
namespace {

// lo in lanes 0-7, hi in lanes 8-15.
inline __m512 join(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m256 high_half(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

// 16 bytes at a, then 16 at b; 32 at a, then 32 at b.
inline __m256i join128(const uint8_t* a, const uint8_t* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
}
inline __m512i join256(const uint8_t* a, const uint8_t* b) {
  return join(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
}

// 8 values at a (lanes 0-7) and 8 at b (lanes 8-15) as f32, from f32, f16 or bf16 storage; and
// 16 consecutive bf16 values widened.
inline __m512 pair_f32(const void* a, const void* b) {
  return join(_mm256_loadu_ps(static_cast<const float*>(a)), _mm256_loadu_ps(static_cast<const float*>(b)));
}
inline __m512 widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
inline __m512 pair_f16(const void* a, const void* b) {
  return _mm512_cvtph_ps(join128(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b)));
}
inline __m512 pair_bf16(const void* a, const void* b) {
  return widen_bf16(join128(static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b)));
}

// The 8 floats at p in both halves (one vbroadcastf64x4 from memory).
inline __m512 bcast8(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(p))));
}
// Dword k of p in all 16 lanes. GCC keeps it a separate vpbroadcastd from memory rather than the
// EVEX {1to16} operand of the vpdpbusd using it; the folded form (inline asm) was no faster: decode
// and 5-token verification on llama-1b Q4_0, Zen 5, within noise.
inline __m512i bcast_dword(const void* p, int k) {
  return _mm512_set1_epi32(load_i32(static_cast<const uint8_t*>(p) + 4 * k));
}

}  // namespace
}  // namespace hz::kernels::vnni
