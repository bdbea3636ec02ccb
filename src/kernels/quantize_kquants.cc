// Scalar Q4_K / Q5_K / Q6_K quantizers (for `horizon quantize`), writing GGUF's bit layouts exactly as
// the dequantizers in ref/kquants.cc read them. Offline only: no SIMD variant.
//
// The search, in three stages per super-block of 256 (all errors weighted, see group_weights):
//  1. each group's real-valued (scale, min) (Q6_K: scale): a sweep of step counts around the
//     group's range, each rounded and then least-squares fitted, the best refined by alternating
//     rounding and fitting until the error stops falling;
//  2. the 6-bit (Q6_K: 8-bit) group scales: each group tries the codes next to the rounded ones
//     and keeps the pair whose re-rounded values have the least error under the f16 super-block
//     scales actually stored;
//  3. the super-block scales themselves: a least-squares refit over the 256 values with the codes
//     fixed, kept only when it lowers the error after f16 rounding and re-rounding.
// NOTE: the output is a valid encoding whatever the search does; the search only decides which
// encoding. Its bytes differ from llama.cpp's (its search is a different one), so files are
// compared by the model's output divergence, not byte for byte.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "kernels/quantize_kquants.h"

#include "kernels/kernels.h"

namespace hz::kernels {
namespace {

constexpr int kGroupK = 32;   // Q4_K / Q5_K group
constexpr int kGroup6 = 16;   // Q6_K group
constexpr float kTiny = 1e-15f;

int nearest(float v) { return static_cast<int>(std::lrintf(v)); }

float f16_round(float v) { return f16_to_f32(f32_to_f16(v)); }

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

// Error weights of one group: the group's RMS plus each value's magnitude, so that large weights
// (which dominate a dot product's error when activations are spread) count more without letting
// small ones count for nothing.
void group_weights(const float* x, int n, float* w) {
  float sum_x2 = 0;
  for (int l = 0; l < n; ++l) sum_x2 += x[l] * x[l];
  const float rms = std::sqrt(sum_x2 / static_cast<float>(n));
  for (int l = 0; l < n; ++l) w[l] = rms + std::fabs(x[l]);
}

// ---- Q4_K / Q5_K: x ~= scale * q - min, q in 0..qmax, min >= 0 -------------------------------

// Codes of x for a given (scale, min).
void round_affine(const float* x, int n, int qmax, float scale, float min, uint8_t* q) {
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  for (int l = 0; l < n; ++l) q[l] = static_cast<uint8_t>(std::clamp(nearest((x[l] + min) * inv), 0, qmax));
}

float affine_error(const float* x, const float* w, int n, float scale, float min, const uint8_t* q) {
  float e = 0;
  for (int l = 0; l < n; ++l) {
    const float diff = scale * q[l] - min - x[l];
    e += w[l] * diff * diff;
  }
  return e;
}

// Weighted least squares of x ~= scale * q - min for fixed codes, with min >= 0 (a negative min
// would need codes below 0). Returns false when the codes are all equal.
bool fit_affine(const float* x, const float* w, int n, const uint8_t* q, float* scale, float* min) {
  float sw = 0, sx = 0, sq = 0, sq2 = 0, sxq = 0;
  for (int l = 0; l < n; ++l) {
    sw += w[l];
    sx += w[l] * x[l];
    sq += w[l] * q[l];
    sq2 += w[l] * q[l] * q[l];
    sxq += w[l] * x[l] * q[l];
  }
  const float det = sw * sq2 - sq * sq;
  if (det <= 0 || sq2 <= 0) return false;
  float s = (sw * sxq - sx * sq) / det;
  float b = (sq2 * sx - sq * sxq) / det;  // x ~= s*q + b
  if (b > 0) {
    b = 0;
    s = sxq / sq2;
  }
  if (!(s > 0)) return false;
  *scale = s;
  *min = -b;
  return true;
}

// Stage 1 for one group: the real-valued (scale, min) of least weighted error.
void search_group_affine(const float* x, const float* w, int n, int qmax, float* best_scale, float* best_min) {
  float lo = 0, hi = 0;  // the range always includes 0, so min >= 0
  for (int l = 0; l < n; ++l) {
    lo = std::min(lo, x[l]);
    hi = std::max(hi, x[l]);
  }
  *best_min = -lo;
  *best_scale = 0;
  if (hi - lo < kTiny) return;
  uint8_t q[kGroupK];
  float best_err = std::numeric_limits<float>::infinity();
  // Step counts from qmax-1 to qmax over the range (each refitted). NOTE: counts above qmax (a finer
  // grid that clips the extremes) lower the weighted error a little further but raised the KL
  // divergence of a quantized model against its f32 original; so the sweep stops at qmax.
  for (int step = -10; step <= 0; ++step) {
    const float steps = static_cast<float>(qmax) + 0.1f * static_cast<float>(step);
    const float scale0 = (hi - lo) / steps;
    round_affine(x, n, qmax, scale0, -lo, q);
    float s, m;
    if (!fit_affine(x, w, n, q, &s, &m)) continue;
    const float e = affine_error(x, w, n, s, m, q);
    if (e < best_err) {
      best_err = e;
      *best_scale = s;
      *best_min = m;
    }
  }
  if (*best_scale <= 0) {  // every candidate degenerate: the plain range fit
    *best_scale = (hi - lo) / static_cast<float>(qmax);
    return;
  }
  // Alternate rounding and fitting from the best candidate while it helps.
  for (int it = 0; it < 4; ++it) {
    round_affine(x, n, qmax, *best_scale, *best_min, q);
    float s, m;
    if (!fit_affine(x, w, n, q, &s, &m)) break;
    const float e = affine_error(x, w, n, s, m, q);
    if (!(e < best_err)) break;
    best_err = e;
    *best_scale = s;
    *best_min = m;
  }
}

// Stages 2 and 3 for one super-block of 256: writes d, dmin, the packed 6-bit scales/mins and the
// codes q[256].
void quantize_superblock_affine(const float* xb, int qmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales,
                                uint8_t* q) {
  constexpr int kGroups = kQK_K / kGroupK;
  float w[kQK_K];
  float scale[kGroups], min[kGroups];
  float max_scale = 0, max_min = 0;
  for (int g = 0; g < kGroups; ++g) {
    group_weights(xb + g * kGroupK, kGroupK, w + g * kGroupK);
    search_group_affine(xb + g * kGroupK, w + g * kGroupK, kGroupK, qmax, &scale[g], &min[g]);
    max_scale = std::max(max_scale, scale[g]);
    max_min = std::max(max_min, min[g]);
  }
  uint8_t sc[kGroups], m[kGroups];
  // Stage 2: 6-bit codes for every group's scale and min under the stored (f16) d and dmin;
  // returns the block's total error.
  auto choose_codes = [&](float dq, float dmq) {
    float total = 0;
    uint8_t cand[kGroupK];
    for (int g = 0; g < kGroups; ++g) {
      const float* x = xb + g * kGroupK;
      const float* wg = w + g * kGroupK;
      const int sc0 = dq > 0 ? std::clamp(nearest(scale[g] / dq), 0, 63) : 0;
      const int m0 = dmq > 0 ? std::clamp(nearest(min[g] / dmq), 0, 63) : 0;
      float best = std::numeric_limits<float>::infinity();
      for (int a = std::max(sc0 - 1, 0); a <= std::min(sc0 + 1, 63); ++a) {
        for (int b = std::max(m0 - 1, 0); b <= std::min(m0 + 1, 63); ++b) {
          if (b > 0 && dmq <= 0) continue;
          const float s = dq * static_cast<float>(a), mn = dmq * static_cast<float>(b);
          if (s > 0) {
            round_affine(x, kGroupK, qmax, s, mn, cand);
          } else {
            std::memset(cand, 0, sizeof(cand));
          }
          const float e = affine_error(x, wg, kGroupK, s, mn, cand);
          if (e < best) {
            best = e;
            sc[g] = static_cast<uint8_t>(a);
            m[g] = static_cast<uint8_t>(b);
            std::memcpy(q + g * kGroupK, cand, sizeof(cand));
          }
        }
      }
      total += best;
    }
    return total;
  };
  float dq = f16_round(max_scale / 63.0f), dmq = f16_round(max_min / 63.0f);
  float err = choose_codes(dq, dmq);
  // Stage 3: refit d and dmin by least squares over the block (x ~= d*sc*q - dmin*m), codes fixed.
  for (int it = 0; it < 2; ++it) {
    double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
    for (int g = 0; g < kGroups; ++g) {
      for (int l = 0; l < kGroupK; ++l) {
        const int e = g * kGroupK + l;
        const double u = static_cast<double>(sc[g]) * q[e], v = -static_cast<double>(m[g]);
        a11 += w[e] * u * u;
        a12 += w[e] * u * v;
        a22 += w[e] * v * v;
        b1 += w[e] * u * xb[e];
        b2 += w[e] * v * xb[e];
      }
    }
    float nd = dq, ndm = dmq;
    const double det = a11 * a22 - a12 * a12;
    if (a22 > 0 && det > 1e-12 * a11 * a22) {
      nd = static_cast<float>((a22 * b1 - a12 * b2) / det);
      ndm = static_cast<float>((a11 * b2 - a12 * b1) / det);
    } else if (a11 > 0) {
      nd = static_cast<float>(b1 / a11);
    }
    if (!(nd > 0) || !(ndm >= 0)) break;
    const float ndq = f16_round(nd), ndmq = f16_round(ndm);
    if (ndq == dq && ndmq == dmq) break;
    uint8_t keep_sc[kGroups], keep_m[kGroups], keep_q[kQK_K];
    std::memcpy(keep_sc, sc, sizeof(sc));
    std::memcpy(keep_m, m, sizeof(m));
    std::memcpy(keep_q, q, kQK_K);
    const float e = choose_codes(ndq, ndmq);
    if (e < err) {
      err = e;
      dq = ndq;
      dmq = ndmq;
    } else {
      std::memcpy(sc, keep_sc, sizeof(sc));
      std::memcpy(m, keep_m, sizeof(m));
      std::memcpy(q, keep_q, kQK_K);
      break;
    }
  }
  *d_out = f32_to_f16(dq);
  *dmin_out = f32_to_f16(dmq);
  pack_scale_min(sc, m, scales);
}

// ---- Q6_K: x ~= scale * q, q in -32..31 ------------------------------------------------------

void round_signed(const float* x, int n, float scale, int8_t* q) {
  const float inv = scale != 0 ? 1.0f / scale : 0.0f;
  for (int l = 0; l < n; ++l) q[l] = static_cast<int8_t>(std::clamp(nearest(x[l] * inv), -32, 31));
}

float signed_error(const float* x, const float* w, int n, float scale, const int8_t* q) {
  float e = 0;
  for (int l = 0; l < n; ++l) {
    const float diff = scale * q[l] - x[l];
    e += w[l] * diff * diff;
  }
  return e;
}

// Stage 1 for one Q6_K group: the real-valued scale of least weighted error (its sign puts the
// largest magnitude on the -32 side, which has one more step).
float search_group_signed(const float* x, const float* w, int n) {
  float amax = 0, vmax = 0;
  for (int l = 0; l < n; ++l) {
    if (std::fabs(x[l]) > amax) {
      amax = std::fabs(x[l]);
      vmax = x[l];
    }
  }
  if (amax < kTiny) return 0;
  int8_t q[kGroup6];
  float best_scale = vmax / -32.0f, best_err = std::numeric_limits<float>::infinity();
  auto fit = [&](float s0) {
    round_signed(x, n, s0, q);
    float sxq = 0, sq2 = 0;
    for (int l = 0; l < n; ++l) {
      sxq += w[l] * x[l] * q[l];
      sq2 += w[l] * q[l] * q[l];
    }
    if (sq2 <= 0) return false;
    const float s = sxq / sq2;
    const float e = signed_error(x, w, n, s, q);
    if (!(e < best_err)) return false;
    best_err = e;
    best_scale = s;
    return true;
  };
  for (int step = -10; step <= 10; ++step) fit(vmax / -(32.0f + 0.1f * static_cast<float>(step)));
  for (int it = 0; it < 4 && fit(best_scale); ++it) {
  }
  return best_scale;
}

void quantize_superblock_signed(const float* xb, uint16_t* d_out, int8_t* sc, uint8_t* q_out) {
  constexpr int kGroups = kQK_K / kGroup6;
  float w[kQK_K];
  float scale[kGroups];
  float max_scale = 0, max_abs = 0;
  for (int g = 0; g < kGroups; ++g) {
    // Q6_K's error is small next to the groups' spread; weigh by magnitude as for Q4_K.
    group_weights(xb + g * kGroup6, kGroup6, w + g * kGroup6);
    scale[g] = search_group_signed(xb + g * kGroup6, w + g * kGroup6, kGroup6);
    if (std::fabs(scale[g]) > max_abs) {
      max_abs = std::fabs(scale[g]);
      max_scale = scale[g];
    }
  }
  int8_t q[kQK_K];
  if (max_abs < kTiny) {
    *d_out = f32_to_f16(0.0f);
    std::memset(sc, 0, kGroups);
    std::memset(q, 0, sizeof(q));
  } else {
    // The largest scale maps to code -128 (its sign folded into d), as the 8-bit codes are signed.
    auto choose_codes = [&](float dq) {
      float total = 0;
      int8_t cand[kGroup6];
      for (int g = 0; g < kGroups; ++g) {
        const float* x = xb + g * kGroup6;
        const float* wg = w + g * kGroup6;
        const int c0 = std::clamp(nearest(scale[g] / dq), -128, 127);
        float best = std::numeric_limits<float>::infinity();
        for (int c = std::max(c0 - 1, -128); c <= std::min(c0 + 1, 127); ++c) {
          const float s = dq * static_cast<float>(c);
          if (s != 0) {
            round_signed(x, kGroup6, s, cand);
          } else {
            std::memset(cand, 0, sizeof(cand));
          }
          const float e = signed_error(x, wg, kGroup6, s, cand);
          if (e < best) {
            best = e;
            sc[g] = static_cast<int8_t>(c);
            std::memcpy(q + g * kGroup6, cand, sizeof(cand));
          }
        }
        total += best;
      }
      return total;
    };
    float dq = f16_round(max_scale / -128.0f);
    float err = choose_codes(dq);
    for (int it = 0; it < 2; ++it) {
      double num = 0, den = 0;
      for (int e = 0; e < kQK_K; ++e) {
        const double u = static_cast<double>(sc[e / kGroup6]) * q[e];
        num += w[e] * u * xb[e];
        den += w[e] * u * u;
      }
      if (den <= 0) break;
      const float ndq = f16_round(static_cast<float>(num / den));
      if (ndq == dq || ndq == 0) break;
      int8_t keep_sc[kGroups], keep_q[kQK_K];
      std::memcpy(keep_sc, sc, kGroups);
      std::memcpy(keep_q, q, kQK_K);
      const float e = choose_codes(ndq);
      if (e < err) {
        err = e;
        dq = ndq;
      } else {
        std::memcpy(sc, keep_sc, kGroups);
        std::memcpy(q, keep_q, kQK_K);
        break;
      }
    }
    *d_out = f32_to_f16(dq);
  }
  for (int e = 0; e < kQK_K; ++e) q_out[e] = static_cast<uint8_t>(q[e] + 32);  // biased: 0..63
}

}  // namespace

void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n) {
  HZ_CHECK(n % kQK_K == 0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t q[kQK_K];
    quantize_superblock_affine(x + i * kQK_K, 15, &y[i].d, &y[i].dmin, y[i].scales, q);
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
    quantize_superblock_affine(x + i * kQK_K, 31, &y[i].d, &y[i].dmin, y[i].scales, q);
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
    uint8_t q[kQK_K];  // biased by 32: 0..63
    int8_t sc[kQK_K / kGroup6];
    quantize_superblock_signed(x + i * kQK_K, &y[i].d, sc, q);
    std::memcpy(y[i].scales, sc, sizeof(sc));
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
