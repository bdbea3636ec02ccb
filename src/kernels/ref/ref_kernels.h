// Scalar reference kernels: the oracles every SIMD variant is tested against. Same signatures as
// the dispatched entry points (kernel_list.inc); plain loops with a simple, fixed summation order.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace hz::kernels::ref {

#define HZ_KERNEL(variants, ret, name, params, args) ret name params;
#include "kernels/kernel_list.inc"
#undef HZ_KERNEL

// k-quant pieces (ref/kquants.cc)
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n);
float vec_dot_q4_k_q8_k(int64_t n, const BlockQ4_K* w, const BlockQ8_K* x);
float vec_dot_q5_k_q8_k(int64_t n, const BlockQ5_K* w, const BlockQ8_K* x);
float vec_dot_q6_k_q8_k(int64_t n, const BlockQ6_K* w, const BlockQ8_K* x);
// The 6-bit (scale, min) pair `j` (0..7) of a Q4_K/Q5_K block's packed `scales`.
void k_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min);

}  // namespace hz::kernels::ref
