// Q4_K, Q5_K and Q6_K quantizers (scalar, offline use by the model quantizer): GGUF's bit layouts, the
// same the k-quant dequantize and dot kernels read. n must be a multiple of 256.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace hz::kernels {

// Per group of 32: x ~ d*sc*q - dmin*m, q in 0..15, 6-bit sc and m; d, dmin f16 per 256.
void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n);
// As Q4_K with q in 0..31 (the 5th bits in qh).
void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t n);
// Per group of 16: x ~ d*sc*q, q in -32..31, int8 sc; d f16 per 256.
void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t n);

}  // namespace hz::kernels
