// Scalar reference of the KV codecs (kernels/kv_codec.h): the definition every SIMD variant matches.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"
#include "kernels/kv_codec.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/unaligned.h"
#include "tensor/dtype.h"

namespace hz::kernels {

uint8_t f32_to_e4m3(float x) {
  const uint32_t u = bits_from_f32(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  const float a = std::fabs(x);
  if (std::isnan(x)) return 0x7f;
  if (a >= 448.0f) return sign | 0x7e;  // saturate (E4M3 has no infinity)
  if (a < 0.015625f) {                  // below the smallest normal 2^-6: subnormals, step 2^-9
    // a * 512 is exact; nearbyint rounds half to even under the default rounding mode.
    const int q = static_cast<int>(std::nearbyint(a * 512.0f));
    return sign | static_cast<uint8_t>(q);  // q == 8 is exactly the smallest normal (0x08)
  }
  const uint32_t ua = bits_from_f32(a);
  int e = static_cast<int>(ua >> 23) - 127 + 7;
  uint32_t m = (ua >> 20) & 7;
  const uint32_t rem = ua & 0xfffff;
  if (rem > 0x80000 || (rem == 0x80000 && (m & 1))) ++m;  // round to nearest even
  if (m == 8) {
    m = 0;
    ++e;
  }
  if (e > 15 || (e == 15 && m == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>(e << 3) | static_cast<uint8_t>(m);
}

float e4m3_to_f32(uint8_t v) {
  const int e = (v >> 3) & 15;
  const int m = v & 7;
  float a;
  if (e == 15 && m == 7) {
    a = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    a = static_cast<float>(m) * (1.0f / 512.0f);
  } else {
    a = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  }
  return (v & 0x80) ? -a : a;
}

namespace ref {
namespace {

// Code of x for offset m and scale d (1 / d = inv) in [0, top], rounded half away from zero; NaN
// codes as 0 would, +-Inf and values past the range clamp to the nearest end.
int low_bit_code(float x, float m, float inv, int top) {
  float t = ((std::isnan(x) ? 0.0f : x) - m) * inv;
  t = std::min(std::max(t, 0.0f), static_cast<float>(top));
  return static_cast<int>(std::round(t));
}

// Channel `ch` of `rows` rows x[rows][hd] in int8c / int4c / int3 / int2 (kv_codec.h): the scale
// byte and offset of least squared error over the finite values, among the quarter octaves from 0.6
// to 1.19 times (max - min) / top (and large enough for the offset byte to reach min) and the
// offsets near min (in units of `unit` steps); then the codes into each row's bit stream.
void encode_channel(const float* x, int64_t rows, int64_t hd, int64_t ch, int top, int bits, float unit, int64_t reb,
                    uint8_t* elems, uint8_t* scales) {
  float mn = std::numeric_limits<float>::infinity(), mx = -mn;
  for (int64_t r = 0; r < rows; ++r) {
    const float v = x[r * hd + ch];
    if (!std::isfinite(v)) continue;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  uint8_t best_c = 0;
  int8_t best_z = 0;
  const float amax = mn <= mx ? std::max(std::fabs(mn), std::fabs(mx)) : 0.0f;
  if (amax > 0) {
    // Scale byte nearest d, in [1, 127] (a range past the largest scale, even an infinite one, takes 127).
    auto code_of = [](float d) {
      const float c = 4.0f * std::log2(d) + 64.0f;
      return !(c < 127.0f) ? 127 : c < 1.0f ? 1 : static_cast<int>(std::lround(c));
    };
    // |m| = |z| u d <= 128 u d must reach min: d >= amax / (128 u - 1) (one step of slack).
    const float reach = 4.0f * std::log2(amax / (128.0f * unit - 1.0f)) + 64.0f;
    const int c_reach = !(reach < 127.0f) ? 127 : reach < 1.0f ? 1 : static_cast<int>(std::ceil(reach));
    const int c0 = mx > mn ? code_of((mx - mn) / static_cast<float>(top)) : c_reach;
    float best_err = std::numeric_limits<float>::infinity();
    for (int c = std::max(c0 - 3, c_reach); c <= std::min(127, std::max(c0 + 1, c_reach)); ++c) {
      const float d = kv_byte_scale(static_cast<uint8_t>(c)), inv = 1.0f / d;
      const int z0 = static_cast<int>(std::clamp(std::round(mn * inv / unit), -128.0f, 127.0f));
      for (int z = std::max(-128, z0 - 2); z <= std::min(127, z0 + 1); ++z) {
        const float off = unit * static_cast<float>(z), m = off * d;
        float err = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const float v = x[r * hd + ch];
          if (!std::isfinite(v)) continue;
          const float e = v - (static_cast<float>(low_bit_code(v, m, inv, top)) + off) * d;
          err += e * e;
        }
        if (err < best_err || best_c == 0) {  // the first candidate even when errors overflow
          best_err = err;
          best_c = static_cast<uint8_t>(c);
          best_z = static_cast<int8_t>(z);
        }
      }
    }
  }
  scales[ch] = best_c;
  scales[hd + ch] = static_cast<uint8_t>(best_z);
  const float d = kv_byte_scale(best_c), inv = d != 0 ? 1.0f / d : 0.0f;
  const float m = unit * static_cast<float>(best_z) * d;
  const int64_t bit = ch * bits, byte = bit >> 3, sh = bit & 7;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t u = static_cast<uint32_t>(low_bit_code(x[r * hd + ch], m, inv, top));
    uint8_t* row = elems + r * reb;
    row[byte] |= static_cast<uint8_t>(u << sh);
    if (sh + bits > 8) row[byte + 1] |= static_cast<uint8_t>(u >> (8 - sh));
  }
}

}  // namespace

void encode_kv_rows(KvCodec c, const float* x, int64_t rows, int64_t hd, uint8_t* elems, uint8_t* scales) {
  const int64_t reb = kv_row_elem_bytes(c, hd);
  switch (c) {
    case KvCodec::kF32:
      std::memcpy(elems, x, sizeof(float) * rows * hd);
      return;
    case KvCodec::kF16:
      for (int64_t i = 0; i < rows * hd; ++i) store_u16(elems + 2 * i, f32_to_f16(x[i]));
      return;
    case KvCodec::kBF16:
      for (int64_t i = 0; i < rows * hd; ++i) store_u16(elems + 2 * i, f32_to_bf16(x[i]));
      return;
    case KvCodec::kFp8: {
      float amax = 0;
      for (int64_t i = 0; i < rows * hd; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float scale = amax / 448.0f;
      const float inv = scale > 0 ? 1.0f / scale : 0.0f;
      for (int64_t i = 0; i < rows * hd; ++i) elems[i] = f32_to_e4m3(x[i] * inv);
      std::memcpy(scales, &scale, 4);
      return;
    }
    case KvCodec::kInt8:
    case KvCodec::kInt4: {
      const int64_t g = kv_group(hd), ng = kv_groups(hd);
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * hd;
        uint8_t* er = elems + r * reb;
        if (c == KvCodec::kInt4) std::memset(er, 0, reb);
        for (int64_t gi = 0; gi < ng; ++gi) {
          const int64_t b = gi * g, n = std::min(g, hd - b);
          float d;
          if (c == KvCodec::kInt8) {
            float amax = 0;
            for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(xr[b + i]));
            d = amax / 127.0f;
            const float id = d != 0 ? 1.0f / d : 0.0f;
            for (int64_t i = 0; i < n; ++i) {
              er[b + i] = static_cast<uint8_t>(static_cast<int8_t>(std::round(xr[b + i] * id)));
            }
          } else {
            // Q4_0's recipe: the value of largest magnitude maps to -8.
            float amax = 0, vmax = 0;
            for (int64_t i = 0; i < n; ++i) {
              if (std::fabs(xr[b + i]) > amax) {
                amax = std::fabs(xr[b + i]);
                vmax = xr[b + i];
              }
            }
            d = vmax / -8.0f;
            const float id = d != 0 ? 1.0f / d : 0.0f;
            for (int64_t i = 0; i < n; ++i) {
              const int q = std::min(15, static_cast<int>(static_cast<int8_t>(xr[b + i] * id + 8.5f)));
              const int64_t e = b + i;
              er[e / 2] |= static_cast<uint8_t>(q << ((e & 1) * 4));
            }
          }
          store_u16(scales + (r * ng + gi) * 2, f32_to_f16(d));
        }
      }
      return;
    }
    case KvCodec::kInt8c:
    case KvCodec::kInt4c:
    case KvCodec::kInt3:
    case KvCodec::kInt2: {
      const int bits = kv_type_element_bits(c), top = (1 << bits) - 1;
      const float unit = kv_channel_offset_unit(c);
      std::memset(elems, 0, rows * reb);
      for (int64_t ch = 0; ch < hd; ++ch) encode_channel(x, rows, hd, ch, top, bits, unit, reb, elems, scales);
      return;
    }
  }
}

void decode_kv_rows(KvCodec c, const uint8_t* elems, const uint8_t* scales, int64_t rows, int64_t hd, float* y) {
  const int64_t reb = kv_row_elem_bytes(c, hd);
  switch (c) {
    case KvCodec::kF32:
      std::memcpy(y, elems, sizeof(float) * rows * hd);
      return;
    case KvCodec::kF16:
      for (int64_t i = 0; i < rows * hd; ++i) y[i] = f16_to_f32(load_u16(elems + 2 * i));
      return;
    case KvCodec::kBF16:
      for (int64_t i = 0; i < rows * hd; ++i) y[i] = bf16_to_f32(load_u16(elems + 2 * i));
      return;
    case KvCodec::kFp8: {
      const float scale = load_f32(scales);
      for (int64_t i = 0; i < rows * hd; ++i) y[i] = e4m3_to_f32(elems[i]) * scale;
      return;
    }
    case KvCodec::kInt8:
    case KvCodec::kInt4: {
      const int64_t g = kv_group(hd), ng = kv_groups(hd);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* er = elems + r * reb;
        float* yr = y + r * hd;
        for (int64_t gi = 0; gi < ng; ++gi) {
          const float d = f16_to_f32(load_u16(scales + (r * ng + gi) * 2));
          const int64_t b = gi * g, n = std::min(g, hd - b);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t e = b + i;
            const int q = c == KvCodec::kInt8 ? static_cast<int8_t>(er[e]) : ((er[e / 2] >> ((e & 1) * 4)) & 15) - 8;
            yr[e] = static_cast<float>(q) * d;
          }
        }
      }
      return;
    }
    case KvCodec::kInt8c:
    case KvCodec::kInt4c:
    case KvCodec::kInt3:
    case KvCodec::kInt2: {
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* er = elems + r * reb;
        for (int64_t e = 0; e < hd; ++e) {
          const int q = kv_channel_code(c, er, e);
          y[r * hd + e] = (static_cast<float>(q) + kv_channel_offset(c, scales, hd, e)) * kv_byte_scale(scales[e]);
        }
      }
      return;
    }
  }
}

}  // namespace ref
}  // namespace hz::kernels
