// AVX-512 VNNI (EVEX-256: avx512vl + avx512vnni) variants of the Q4_0/Q8_0 (and Q4_K/Q6_K) weight matmuls, same
// signatures and bit-identical results as their avx2:: counterparts. Only dispatch.cc calls them,
// and only after checking the CPU (kernels::vnni_supported); tests call them directly under a skip.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace hz::kernels::vnni {

void matmul_q4_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_q8_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
// Q4_K / Q6_K weights against Q8_K activations (8-row groups; avx2::matmul_kquant's results).
void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride);

}  // namespace hz::kernels::vnni
