// Scalar k-quant kernels (Q4_K, Q5_K, Q6_K): dequantization and dot products against Q8_K
// activations, in GGUF's bit layouts. Integer sums per super-block are exact; floats enter once
// per super-block, as fmas in a fixed order (the rule the Q4_K/Q6_K group matmuls reproduce).
#include <cmath>

#include "base/check.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::ref {

void k_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  // Bytes 0-3: scales 0-3 (low 6 bits); bytes 4-7: mins 0-3; bytes 8-11: low nibbles of scales 4-7
  // and high nibbles of mins 4-7; the top 2 bits of bytes 0-7 hold the high bits of pairs 4-7.
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

namespace {

// Unpacked quants of one super-block: q[e] for element e, 0..15 (Q4_K), 0..31 (Q5_K), -32..31 (Q6_K).
void unpack_q4_k(const BlockQ4_K& b, int8_t* q) {
  for (int c = 0; c < 4; ++c) {  // 64-element chunks: 32 low nibbles then 32 high nibbles
    for (int l = 0; l < 32; ++l) {
      q[c * 64 + l] = static_cast<int8_t>(b.qs[c * 32 + l] & 0x0f);
      q[c * 64 + 32 + l] = static_cast<int8_t>(b.qs[c * 32 + l] >> 4);
    }
  }
}

void unpack_q5_k(const BlockQ5_K& b, int8_t* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      // Group g = 2c (low nibbles) / 2c+1 (high nibbles) takes its 5th bit from bit g of qh[l].
      q[c * 64 + l] = static_cast<int8_t>((b.qs[c * 32 + l] & 0x0f) | (((b.qh[l] >> (2 * c)) & 1) << 4));
      q[c * 64 + 32 + l] = static_cast<int8_t>((b.qs[c * 32 + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
  }
}

void unpack_q6_k(const BlockQ6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h) {  // 128-element halves: 64 ql bytes and 32 qh bytes each
    const uint8_t* ql = b.ql + h * 64;
    const uint8_t* qh = b.qh + h * 32;
    int8_t* out = q + h * 128;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

// Q4_K and Q5_K share the 8 x (6-bit scale, 6-bit min) layout over 32-element groups.
template <typename Block>
void dequantize_scale_min(const Block* x, float* y, int64_t n, void (*unpack)(const Block&, int8_t*)) {
  HZ_CHECK(n % kQK_K == 0);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack(x[i], q);
    const float d = f16_to_f32(x[i].d);
    const float dmin = f16_to_f32(x[i].dmin);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      k_scale_min(g, x[i].scales, &sc, &m);
      const float dg = d * sc, mg = dmin * m;
      for (int l = 0; l < 32; ++l) y[i * kQK_K + g * 32 + l] = dg * q[g * 32 + l] - mg;
    }
  }
}

template <typename Block>
float dot_scale_min(int64_t n, const Block* w, const BlockQ8_K* x, void (*unpack)(const Block&, int8_t*)) {
  HZ_CHECK(n % kQK_K == 0);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack(w[i], q);
    int32_t sum_scaled = 0, sum_mins = 0;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      k_scale_min(g, w[i].scales, &sc, &m);
      int32_t s = 0;
      for (int l = 0; l < 32; ++l) s += q[g * 32 + l] * x[i].qs[g * 32 + l];
      sum_scaled += sc * s;
      sum_mins += m * (x[i].bsums[2 * g] + x[i].bsums[2 * g + 1]);
    }
    // The block-order rule the SIMD matmuls follow bit for bit: one fma per term, in this order.
    const float d = f16_to_f32(w[i].d) * x[i].d;
    const float dmin = f16_to_f32(w[i].dmin) * x[i].d;
    sum = std::fma(d, static_cast<float>(sum_scaled), sum);
    sum = std::fma(-dmin, static_cast<float>(sum_mins), sum);
  }
  return sum;
}

}  // namespace

void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n) { dequantize_scale_min(x, y, n, unpack_q4_k); }
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n) { dequantize_scale_min(x, y, n, unpack_q5_k); }

void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n) {
  HZ_CHECK(n % kQK_K == 0);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack_q6_k(x[i], q);
    const float d = f16_to_f32(x[i].d);
    for (int e = 0; e < kQK_K; ++e) y[i * kQK_K + e] = d * x[i].scales[e / 16] * q[e];
  }
}

float vec_dot_q4_k_q8_k(int64_t n, const BlockQ4_K* w, const BlockQ8_K* x) { return dot_scale_min(n, w, x, unpack_q4_k); }
float vec_dot_q5_k_q8_k(int64_t n, const BlockQ5_K* w, const BlockQ8_K* x) { return dot_scale_min(n, w, x, unpack_q5_k); }

float vec_dot_q6_k_q8_k(int64_t n, const BlockQ6_K* w, const BlockQ8_K* x) {
  HZ_CHECK(n % kQK_K == 0);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    unpack_q6_k(w[i], q);
    int32_t isum = 0;
    for (int s = 0; s < kQK_K / 16; ++s) {
      int32_t p = 0;
      for (int l = 0; l < 16; ++l) p += q[s * 16 + l] * x[i].qs[s * 16 + l];
      isum += w[i].scales[s] * p;
    }
    sum = std::fma(f16_to_f32(w[i].d) * x[i].d, static_cast<float>(isum), sum);
  }
  return sum;
}

}  // namespace hz::kernels::ref
