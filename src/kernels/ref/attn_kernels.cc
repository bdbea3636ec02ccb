// Scalar reference of the fused attention kernels (kernels/attn_kernels.h): the definition the
// SIMD variants match up to summation order.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ref/ref_kernels.h"
#include "kernels/unaligned.h"
#include "tensor/dtype.h"

namespace hz::kernels::ref {
namespace {


// Element i of a row as the codec stores it, before any scale: the value for f32/f16/bf16, the
// E4M3 value for fp8, the signed integer code for int8/int4, the unsigned code for the channel-scaled codecs.
float raw(KvCodec c, const uint8_t* row, int64_t i) {
  switch (c) {
    case KvCodec::kF32: return load_f32(row + 4 * i);
    case KvCodec::kF16: return f16_to_f32(load_u16(row + 2 * i));
    case KvCodec::kBF16: return bf16_to_f32(load_u16(row + 2 * i));
    case KvCodec::kFp8: return e4m3_to_f32(row[i]);
    case KvCodec::kInt8: return static_cast<float>(static_cast<int8_t>(row[i]));
    case KvCodec::kInt4: return static_cast<float>(((row[i / 2] >> ((i & 1) * 4)) & 15) - 8);
    case KvCodec::kInt8c: case KvCodec::kInt4c: case KvCodec::kInt3: case KvCodec::kInt2:
      return static_cast<float>(kv_channel_code(c, row, i));
  }
  return 0;
}

bool grouped(KvCodec c) { return kv_grouped(c); }

// Element i as it enters the dot products: the raw value; for channel-scaled codecs (q + off) * d with its
// channel's offset and scale (`hd` channels).
float elem(KvCodec c, const uint8_t* row, const uint8_t* scales, int64_t hd, int64_t i) {
  const float v = raw(c, row, i);
  return kv_channel_scaled(c) ? (v + kv_channel_offset(c, scales, hd, i)) * kv_byte_scale(scales[i]) : v;
}

}  // namespace

void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t hd, float* scores) {
  const int64_t reb = kv_row_elem_bytes(c, hd);
  const int64_t g = grouped(c) ? kv_group(hd) : hd, ng = grouped(c) ? kv_groups(hd) : 1;
  const float fp8_scale = c == KvCodec::kFp8 ? load_f32(scales) : 1.0f;
  for (int32_t h = 0; h < num_heads; ++h) {
    const float* qh = q + h * hd;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = elems + r * reb;
      float s = 0;
      for (int64_t gi = 0; gi < ng; ++gi) {
        const int64_t b = gi * g, e = std::min(hd, b + g);
        float t = 0;
        for (int64_t i = b; i < e; ++i) t += qh[i] * elem(c, row, scales, hd, i);
        s += grouped(c) ? f16_to_f32(load_u16(scales + (r * ng + gi) * 2)) * t : t;
      }
      scores[h * rows + r] = c == KvCodec::kFp8 ? s * fp8_scale : s;
    }
  }
}

void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t hd, float* acc) {
  const int64_t reb = kv_row_elem_bytes(c, hd);
  const int64_t g = grouped(c) ? kv_group(hd) : hd, ng = grouped(c) ? kv_groups(hd) : 1;
  const float fp8_scale = c == KvCodec::kFp8 ? load_f32(scales) : 1.0f;
  for (int32_t h = 0; h < num_heads; ++h) {
    float* ah = acc + h * hd;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = elems + r * reb;
      const float pr = p[h * rows + r];
      for (int64_t gi = 0; gi < ng; ++gi) {
        const int64_t b = gi * g, e = std::min(hd, b + g);
        float coef = pr;
        if (grouped(c)) coef = pr * f16_to_f32(load_u16(scales + (r * ng + gi) * 2));
        if (c == KvCodec::kFp8) coef = pr * fp8_scale;
        for (int64_t i = b; i < e; ++i) ah[i] += coef * elem(c, row, scales, hd, i);
      }
    }
  }
}

float exp_shift_sum(float* x, int64_t n, float shift) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

void softmax_tile(float* s, int32_t heads, int64_t n, int64_t hd, bool first, float* part) {
  float* mx = part;
  float* sum = part + heads;
  for (int32_t h = 0; h < heads; ++h) {
    float* x = s + h * n;
    float m = x[0];
    for (int64_t j = 0; j < n; ++j) m = std::isnan(x[j]) || std::isnan(m) ? x[j] + m : std::max(m, x[j]);
    float* ah = part + 2 * heads + h * hd;
    if (first) {
      mx[h] = m;
      sum[h] = 0;
      std::fill(ah, ah + hd, 0.0f);
    } else if (mx[h] < m) {
      const float c = std::exp(mx[h] - m);
      sum[h] *= c;
      for (int64_t i = 0; i < hd; ++i) ah[i] *= c;
      mx[h] = m;
    }
    sum[h] += exp_shift_sum(x, n, mx[h]);
  }
}

}  // namespace hz::kernels::ref
