// The integer codes of eight consecutive KV elements, as int32 lanes, for each packed KV layout
// (kernels/kv_codec.h): shared by the AVX2 decoder (avx2/kv_codec.cc) and the attention row
// loaders (avx2/attn_kernels.cc). `i` is the element index of the first of the eight (a multiple
// of 8). Include only from files compiled with at least -mavx2.
//
// NOTE: internal linkage only (anonymous namespace), like int_lanes.h.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace hz::kernels::avx2 {
namespace {

// int8: one signed code per byte.
inline __m256i kv_codes_i8(const uint8_t* row, int64_t i) {
  int64_t v;
  std::memcpy(&v, row + i, 8);
  return _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(v));
}
// int8c: one unsigned code per byte.
inline __m256i kv_codes_u8(const uint8_t* row, int64_t i) {
  int64_t v;
  std::memcpy(&v, row + i, 8);
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
}
// int4 / int4c: element 2j in the low nibble of byte j, unsigned (int4 subtracts 8).
inline __m256i kv_codes_u4(const uint8_t* row, int64_t i) {
  int32_t v;
  std::memcpy(&v, row + i / 2, 4);
  const __m128i b = _mm_cvtsi32_si128(v);
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m)));
}
// int3: element j of the chunk at bits [3j, 3j + 3) of its 3 bytes.
inline __m256i kv_codes_u3(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + 3 * i / 8;
  const int32_t v = b[0] | (b[1] << 8) | (b[2] << 16);
  const __m256i w = _mm256_srlv_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21));
  return _mm256_and_si256(w, _mm256_set1_epi32(7));
}
// int2: element j at bits [2j, 2j + 2) of its 2 bytes.
inline __m256i kv_codes_u2(const uint8_t* row, int64_t i) {
  uint16_t v;
  std::memcpy(&v, row + i / 4, 2);
  const __m256i w = _mm256_srlv_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
  return _mm256_and_si256(w, _mm256_set1_epi32(3));
}

}  // namespace
}  // namespace hz::kernels::avx2
