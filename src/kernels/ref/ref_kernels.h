// Scalar reference kernels: the oracles every SIMD variant is tested against. Same signatures as
// the dispatched entry points in kernels.h; plain loops with a simple, fixed summation order.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace hz::kernels::ref {

uint64_t checksum64(const void* p, size_t n, uint64_t seed);

void f16_to_f32_row(const uint16_t* x, float* y, int64_t n);
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);
void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n);
void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n);

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n);
void dequantize_row(DType type, const void* x, float* y, int64_t n);

// k-quant pieces (ref/kquants.cc)
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n);
float vec_dot_q4_k_q8_k(int64_t n, const BlockQ4_K* w, const BlockQ8_K* x);
float vec_dot_q5_k_q8_k(int64_t n, const BlockQ5_K* w, const BlockQ8_K* x);
float vec_dot_q6_k_q8_k(int64_t n, const BlockQ6_K* w, const BlockQ8_K* x);
// The 6-bit (scale, min) pair `j` (0..7) of a Q4_K/Q5_K block's packed `scales`.
void k_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min);

void vec_dot(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out);
void matmul(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
            const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride);

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void swiglu(float* gate, const float* up, int64_t n);
void add(float* y, const float* x, int64_t n);
void axpy(float* y, float a, const float* x, int64_t n);
void scale(float* x, float a, int64_t n);
void softmax(float* x, int64_t n);
float dot_f32(const float* a, const float* b, int64_t n);
float dot_f32_f16(const float* a, const uint16_t* b, int64_t n);
void axpy_f16(float* y, float a, const uint16_t* x, int64_t n);

}  // namespace hz::kernels::ref
