// AVX2/FMA/F16C kernels (only the .cc files in this folder are compiled with those ISA flags).
// The rows of kernel_list.inc marked `avx2` are declared here; a kernel marked `scalar` resolves to
// the scalar reference through the using-directive below: qualified lookup of avx2::name finds
// ref::name only when avx2 declares no `name` itself (dispatch.cc's AVX2 table relies on it).
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::kernels::avx2 {

using namespace ::hz::kernels::ref;  // NOLINT: fallback for kernels not (yet) vectorized

#define HZ_AVX2_DECLARE_avx2(ret, name, params) ret name params;
#define HZ_AVX2_DECLARE_scalar(ret, name, params)
#define HZ_KERNEL(variants, ret, name, params, args) HZ_AVX2_DECLARE_##variants(ret, name, params)
#include "kernels/kernel_list.inc"
#undef HZ_KERNEL
#undef HZ_AVX2_DECLARE_avx2
#undef HZ_AVX2_DECLARE_scalar

// Q4_0/Q8_0 weights against Q8_0 activations (avx2/matmul_q.cc).
void vec_dot_q4_0(int64_t n, const void* w_row, const void* x_row, float* out);
void vec_dot_q8_0(int64_t n, const void* w_row, const void* x_row, float* out);
void matmul_q4_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_q8_0(int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end, const void* x,
                 uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
// The k-quant halves of vec_dot/matmul (avx2/kquants.cc).
void vec_dot_kquant(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out);
// Q4_K/Q6_K matmuls with fewer tokens than this run row at a time, more in 8-row groups.
constexpr int64_t kGroupMinTokens = 4;
void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);

}  // namespace hz::kernels::avx2
