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
// Q4_K / Q5_K / Q6_K weights against Q8_K activations (up to kKquantFewTokens tokens:
// matmul_kquant_few; more: 8-row groups; avx2::matmul_kquant's results).
void matmul_kquant(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                   const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
// The few-token k-quant kernels (4 rows at a time, nothing decoded beyond the dots) against the
// 8-row groups (each super-block decoded once for many tokens): llama-1b Q4_K_M, 2 threads, Zen 5,
// tokens/s of one step, groups -> few: 512-bit 4 tokens 65 -> 124, 5: 72 -> 135, 8: 89 -> 144,
// 12: 118 -> 144, 16: 141-151 either way, 24: 188 -> 149; on 256-bit registers 4 tokens 68 -> 82,
// 5: 79 -> 92, 8: 94 -> 93, 12: 109 -> 96. (Speculative verification of 4 drafted tokens is a
// 5-token step.) Same bits either way.
constexpr int64_t kKquantFewTokens = 12;
constexpr int64_t kKquantFewTokensYmm = 5;
// The k-quant matmul of a few tokens on 512-bit registers (avx512/kquant_decode.cc): VNNI dots of
// 64 quants at a time, 4 rows at a time, up to 5 tokens at once (more in chunks of 5 over each 4
// rows while they are in the cache); avx2::matmul_kquant's results. matmul_kquant calls it up to
// kKquantFewTokens tokens.
void matmul_kquant_few(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                       const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride);
// The two above with every 8-row group on 256-bit registers (matmul_kquant and matmul_packed run
// pairs of groups on 512-bit ones): the same results, for CPUs where 512-bit operations cost two
// 256-bit ones, and for A/B runs (HORIZON_VNNI=256).
void matmul_kquant_ymm(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                       const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
// Zen 4 (512-bit operations as two 256-bit halves): up to kKquantFewTokensYmm tokens
// matmul_kquant_ymm, more matmul_kquant with the 512-bit few-token kernel only up to 3 tokens (as
// measured on Zen 4 when it was tuned). The same results.
void matmul_kquant_split(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin,
                         int64_t row_end, const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y,
                         int64_t y_stride);
void matmul_packed_ymm(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                       int64_t num_tokens, float* y, int64_t y_stride);
// matmul_packed (Q4_0 / Q8_0 only) with the block dots of each pair of groups on AMX tiles (Intel
// Xeon from Sapphire Rapids; kernels::amx_supported, which also asks the OS for the tile state):
// the same results. Each call loads its thread's tile configuration and releases it.
void matmul_packed_amx(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                       int64_t num_tokens, float* y, int64_t y_stride);
// F32 / F16 / BF16 weights against f32 activations, two rows per 512-bit register (avx2::matmul's
// results; avx512/matmul_float.cc), for every token count.
void matmul_float(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                  const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride);
// The same results with two tokens per register instead of two rows (one row's 8 weights in both
// halves against two tokens' activations): fewer broadcasts per FMA, faster from 4 tokens on Zen 5.
void matmul_float_token_pairs(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin,
                              int64_t row_end, const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y,
                              int64_t y_stride);
// The same results for short rows (weights in cache, a few steps a row): 16 rows x 1-2 tokens a
// tile, each token's 16 outputs reduced together and stored at once.
void matmul_float_short_rows(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin,
                             int64_t row_end, const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y,
                             int64_t y_stride);
// The fused attention kernels (kernels::kv_scores / kv_accumulate) on 512-bit registers for the f32,
// f16 and bf16 codecs, bit-identical to avx2::'s; other codecs go to those (avx512/attn_kernels.cc).
void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales, int64_t rows,
               int64_t head_dim, float* scores);
void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t head_dim, float* acc);
// kernels::softmax_tile with 16-lane exponentials, bit-identical to avx2::'s.
void softmax_tile(float* s, int32_t heads, int64_t n, int64_t head_dim, bool first, float* part);

}  // namespace hz::kernels::vnni
