// Scalar Q4_K / Q5_K / Q6_K quantizers (for `horizon quantize`), writing GGUF's bit layouts exactly as
// the dequantizers in ref/kquants.cc read them. NOTE: a direct min/max fit per group, not llama.cpp's
// iterative error search, so bytes differ from llama.cpp's output while the layout (and so every
// reader) is the same; quality is checked by round-trip tests. Offline only: no SIMD variant.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/quantize_kquants.h"

#include "kernels/kernels.h"

namespace hz::kernels {
namespace {

int nearest(float v) { return static_cast<int>(std::lround(v)); }

// Inverse of ref::k_scale_min: 8 (scale, min) pairs of 6 bits into 12 bytes.
void pack_scale_min(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
  std::memset(q, 0, kKScaleBytes);
  for (int j = 0; j < 4; ++j) {
    q[j] = sc[j] & 63;
    q[j + 4] = m[j] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    q[j + 4] = static_cast<uint8_t>((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
    q[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    q[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
  }
}

}  // namespace

namespace {

// One super-block of 256 as x ~= d * sc[g] * q - dmin * m[g] per group g of 32, q in 0..qmax (15
// for Q4_K, 31 for Q5_K): writes d, dmin and the packed 6-bit scales/mins, returns q in q[256].
void fit_scale_min(const float* xb, int qmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales, uint8_t* q) {
  float group_scale[8], group_min[8];
  float max_scale = 0, max_min = 0;
  for (int g = 0; g < 8; ++g) {
    float lo = 0, hi = 0;  // the range always includes 0 (min >= 0 keeps zero exact-ish)
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, xb[g * 32 + l]);
      hi = std::max(hi, xb[g * 32 + l]);
    }
    group_scale[g] = (hi - lo) / static_cast<float>(qmax);
    group_min[g] = -lo;
    max_scale = std::max(max_scale, group_scale[g]);
    max_min = std::max(max_min, group_min[g]);
  }
  // Super-block scales so that the 6-bit group scales span 0..63.
  *d_out = f32_to_f16(max_scale / 63.0f);
  *dmin_out = f32_to_f16(max_min / 63.0f);
  const float dq = f16_to_f32(*d_out), dminq = f16_to_f32(*dmin_out);
  uint8_t sc[8], m[8];
  for (int g = 0; g < 8; ++g) {
    // Round the scale up so the group's range still fits 0..qmax after rounding.
    sc[g] = dq > 0 ? static_cast<uint8_t>(std::clamp(static_cast<int>(std::ceil(group_scale[g] / dq - 1e-4f)), 0, 63)) : 0;
    m[g] = dminq > 0 ? static_cast<uint8_t>(std::clamp(nearest(group_min[g] / dminq), 0, 63)) : 0;
  }
  pack_scale_min(sc, m, scales);
  for (int g = 0; g < 8; ++g) {
    const float dg = dq * sc[g], mg = dminq * m[g];
    for (int l = 0; l < 32; ++l) {
      const int v = dg > 0 ? nearest((xb[g * 32 + l] + mg) / dg) : 0;
      q[g * 32 + l] = static_cast<uint8_t>(std::clamp(v, 0, qmax));
    }
  }
}

}  // namespace

void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n) {
  HZ_CHECK(n % kQK_K == 0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t q[kQK_K];
    fit_scale_min(x + i * kQK_K, 15, &y[i].d, &y[i].dmin, y[i].scales, q);
    // 64-element chunks: group 2c in the low nibbles, group 2c+1 in the high nibbles.
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) y[i].qs[c * 32 + l] = static_cast<uint8_t>(q[c * 64 + l] | (q[c * 64 + 32 + l] << 4));
    }
  }
}

void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t n) {
  HZ_CHECK(n % kQK_K == 0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t q[kQK_K];
    fit_scale_min(x + i * kQK_K, 31, &y[i].d, &y[i].dmin, y[i].scales, q);
    // Low 4 bits as Q4_K; the 5th bit of element l of group g is bit g of qh[l].
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = q[c * 64 + l], hi = q[c * 64 + 32 + l];
        y[i].qs[c * 32 + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t n) {
  HZ_CHECK(n % kQK_K == 0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* xb = x + i * kQK_K;
    // Per group of 16: the value of largest magnitude maps to -32 (as llama.cpp's Q6_K does), so
    // the group's scale carries the sign and q spans -32..31.
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; ++g) {
      float vmax = 0, amax = 0;
      for (int l = 0; l < 16; ++l) {
        const float v = xb[g * 16 + l];
        if (std::fabs(v) > amax) {
          amax = std::fabs(v);
          vmax = v;
        }
      }
      scales[g] = vmax / -32.0f;
      if (std::fabs(scales[g]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    int8_t sc[16];
    float d = 0;
    if (max_abs_scale > 0) {
      const float iscale = -128.0f / max_scale;
      for (int g = 0; g < 16; ++g) sc[g] = static_cast<int8_t>(std::clamp(nearest(iscale * scales[g]), -128, 127));
      d = 1.0f / iscale;
    } else {
      std::memset(sc, 0, sizeof(sc));
    }
    y[i].d = f32_to_f16(d);
    const float dq = f16_to_f32(y[i].d);
    std::memcpy(y[i].scales, sc, sizeof(sc));
    uint8_t q[kQK_K];  // biased by 32: 0..63
    for (int g = 0; g < 16; ++g) {
      const float dg = dq * sc[g];
      for (int l = 0; l < 16; ++l) {
        const int v = dg != 0 ? nearest(xb[g * 16 + l] / dg) : 0;
        q[g * 16 + l] = static_cast<uint8_t>(std::clamp(v, -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qq = q + h * 128;
      uint8_t* ql = y[i].ql + h * 64;
      uint8_t* qh = y[i].qh + h * 32;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((qq[l] & 0x0f) | ((qq[l + 64] & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0x0f) | ((qq[l + 96] & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace hz::kernels
