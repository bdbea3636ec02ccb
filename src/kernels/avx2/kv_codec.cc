// AVX2 KV codecs. Decoding (on the attention hot path) is vectorized and bit-identical to the scalar
// reference: every element is one int->float conversion and one multiply, as there. Encoding runs
// once per block and head when a block is finalized, off the hot path, so it reuses the reference
// (its round-half-away-from-zero is not one AVX2 instruction, and the bytes must match exactly;
// the channel-scaled codecs also search their scales).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/avx2/avx2_common.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/kv_codec.h"
#include "tensor/dtype.h"

namespace hz::kernels::avx2 {
namespace {

const float* e4m3_table() {
  static const float* table = [] {
    static float t[256];
    for (int i = 0; i < 256; ++i) t[i] = e4m3_to_f32(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

inline __m256 load8_i8(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(v)));
}

// 8 int4 values from 4 bytes (element 2j in the low nibble of byte j), minus 8.
inline __m256 load8_i4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  const __m128i b = _mm_cvtsi32_si128(v);
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, m);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
  const __m128i inter = _mm_unpacklo_epi8(lo, hi);
  const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(inter), _mm256_set1_epi32(8));
  return _mm256_cvtepi32_ps(q);
}

// 8 int8c codes from 8 bytes.
inline __m256 load8_u8(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v)));
}

// 8 int4c codes from 4 bytes (element 2j in the low nibble of byte j).
inline __m256 load8_u4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  const __m128i b = _mm_cvtsi32_si128(v);
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m128i inter = _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(inter));
}

// 8 int2 codes from 2 bytes (element j at bits [2j, 2j + 2)).
inline __m256 load8_i2(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  const __m256i w = _mm256_srlv_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
  return _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(3)));
}

// 8 int3 codes from 3 bytes (element j at bits [3j, 3j + 3)).
inline __m256 load8_i3(const uint8_t* p) {
  const int32_t v = p[0] | (p[1] << 8) | (p[2] << 16);
  const __m256i w = _mm256_srlv_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21));
  return _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(7)));
}

}  // namespace

void encode_kv_rows(KvCodec c, const float* x, int64_t rows, int64_t hd, uint8_t* elems, uint8_t* scales) {
  ref::encode_kv_rows(c, x, rows, hd, elems, scales);
}

void decode_kv_rows(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t hd, float* y) {
  const int64_t n = rows * hd;
  switch (c) {
    case KvCodec::kF32:
      std::memcpy(y, elems, sizeof(float) * n);
      return;
    case KvCodec::kF16: {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(elems + 2 * i))));
      }
      if (i < n) ref::decode_kv_rows(c, elems + 2 * i, scales, 1, n - i, y + i);
      return;
    }
    case KvCodec::kBF16: {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(elems + 2 * i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
      }
      if (i < n) ref::decode_kv_rows(c, elems + 2 * i, scales, 1, n - i, y + i);
      return;
    }
    case KvCodec::kFp8: {
      float s;
      std::memcpy(&s, scales, 4);
      const __m256 vs = _mm256_set1_ps(s);
      const float* t = e4m3_table();
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        int64_t v;
        std::memcpy(&v, elems + i, 8);
        __m256i idx = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_i32gather_ps(t, idx, 4), vs));
      }
      for (; i < n; ++i) y[i] = t[elems[i]] * s;
      return;
    }
    case KvCodec::kInt8c:
    case KvCodec::kInt4c:
    case KvCodec::kInt3:
    case KvCodec::kInt2: {
      if (hd % 8 != 0) return ref::decode_kv_rows(c, elems, scales, rows, hd, y);  // head dims 4: scalar
      if (hd > 512) return ref::decode_kv_rows(c, elems, scales, rows, hd, y);
      const int64_t reb = kv_row_elem_bytes(c, hd);
      float d[512], off[512];  // the channel scales and offsets
      for (int64_t i = 0; i < hd; ++i) {
        d[i] = kv_byte_scale(scales[i]);
        off[i] = kv_channel_offset(c, scales, hd, i);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* er = elems + r * reb;
        float* yr = y + r * hd;
        for (int64_t i = 0; i < hd; i += 8) {
          const __m256 q = c == KvCodec::kInt8c   ? load8_u8(er + i)
                           : c == KvCodec::kInt4c ? load8_u4(er + i / 2)
                           : c == KvCodec::kInt3  ? load8_i3(er + 3 * i / 8)
                                                  : load8_i2(er + i / 4);
          _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_add_ps(q, _mm256_loadu_ps(off + i)), _mm256_loadu_ps(d + i)));
        }
      }
      return;
    }
    case KvCodec::kInt8:
    case KvCodec::kInt4: {
      const int64_t g = kv_group(hd), ng = kv_groups(hd);
      if (hd % 8 != 0) return ref::decode_kv_rows(c, elems, scales, rows, hd, y);  // head dims 4: scalar
      const int64_t reb = kv_row_elem_bytes(c, hd);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* er = elems + r * reb;
        float* yr = y + r * hd;
        for (int64_t gi = 0; gi < ng; ++gi) {
          uint16_t dh;
          std::memcpy(&dh, scales + (r * ng + gi) * 2, 2);
          const __m256 d = _mm256_set1_ps(f16_to_f32(dh));
          const int64_t b = gi * g, e = std::min<int64_t>(hd, b + g);
          for (int64_t i = b; i < e; i += 8) {
            __m256 q = c == KvCodec::kInt8 ? load8_i8(er + i) : load8_i4(er + i / 2);
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(q, d));
          }
        }
      }
      return;
    }
  }
}

}  // namespace hz::kernels::avx2
