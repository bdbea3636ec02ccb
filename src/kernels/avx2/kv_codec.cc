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
#include "kernels/avx2/kv_codes.h"
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
          const __m256i codes = c == KvCodec::kInt8c   ? kv_codes_u8(er, i)
                                : c == KvCodec::kInt4c ? kv_codes_u4(er, i)
                                : c == KvCodec::kInt3  ? kv_codes_u3(er, i)
                                                       : kv_codes_u2(er, i);
          const __m256 q = _mm256_cvtepi32_ps(codes);
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
            const __m256i codes = c == KvCodec::kInt8 ? kv_codes_i8(er, i)
                                                      : _mm256_sub_epi32(kv_codes_u4(er, i), _mm256_set1_epi32(8));
            const __m256 q = _mm256_cvtepi32_ps(codes);
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(q, d));
          }
        }
      }
      return;
    }
  }
}

}  // namespace hz::kernels::avx2
