// AVX-512 variants of the weight matmuls: VNNI (EVEX-256: avx512vl + avx512vnni) for Q4_0/Q8_0 and
// the k-quants, 512-bit FMAs for the float types. Same signatures and bit-identical results as their
// avx2:: counterparts. Only dispatch.cc calls them, and only after checking the CPU
// (kernels::vnni_supported); tests call them directly under a skip.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace hz::kernels::vnni {

void matmul_q4_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_q8_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
// Q4_K / Q5_K / Q6_K weights against Q8_K activations (8-row groups; avx2::matmul_kquant's results).
void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride);
// F32 / F16 / BF16 weights against f32 activations, two rows per 512-bit register (avx2::matmul's
// results; avx512/matmul_float.cc), for every token count.
void matmul_float(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                  const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);

}  // namespace hz::kernels::vnni
