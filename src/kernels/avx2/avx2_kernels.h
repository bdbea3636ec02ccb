// AVX2/FMA/F16C kernels (only the .cc files in this folder are compiled with those ISA flags).
// A kernel without an AVX2 variant resolves to the scalar reference through the using-directive
// below: qualified lookup of avx2::name finds ref::name only when avx2 declares no `name` itself.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::avx2 {

uint64_t checksum64(const void* p, size_t n, uint64_t seed);

using namespace ::hz::kernels::ref;  // NOLINT: fallback for kernels not (yet) vectorized

void f16_to_f32_row(const uint16_t* x, float* y, int64_t n);
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);
void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n);
void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n);
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n);

void vec_dot(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out);
void matmul(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
            const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
// Q4_0/Q8_0 weights against Q8_0 activations (avx2/matmul_q.cc).
void vec_dot_q4_0(int64_t n, const void* w_row, const void* x_row, float* out);
void vec_dot_q8_0(int64_t n, const void* w_row, const void* x_row, float* out);
void matmul_q4_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_q8_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride);
// The k-quant halves of vec_dot/matmul (avx2/kquants.cc).
void vec_dot_kquant(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out);
void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void swiglu(float* gate, const float* up, int64_t n);
void add(float* y, const float* x, int64_t n);
void axpy(float* y, float a, const float* x, int64_t n);
void scale(float* x, float a, int64_t n);
void softmax(float* x, int64_t n);
float dot_f32(const float* a, const float* b, int64_t n);
float dot_f32_f16(const float* a, const uint16_t* b, int64_t n);
void axpy_f16(float* y, float a, const uint16_t* x, int64_t n);

}  // namespace hz::kernels::avx2
