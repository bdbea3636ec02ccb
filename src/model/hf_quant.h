// Pre-quantized Hugging Face checkpoints: config.json's `quantization_config` and the dequantizers
// for the weight layouts people download, FP8 (E4M3 with a scale per tensor, per output row or per
// block, as written by the "fp8" and "compressed-tensors" methods), GPTQ (2/4/8-bit, groups,
// act-order) and AWQ (4-bit "gemm"). The loader turns each such matrix into f32 rows exactly
// (one multiply per element, as the checkpoint's own dequantizer does) and stores them in an
// engine type (Q8_0 by default), so the rest of the engine sees ordinary tensors.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace hz {

enum class HfQuantMethod { kNone, kFp8, kGptq, kAwq };

struct HfQuantConfig {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string name;            // quantization_config.quant_method as written ("fp8", "gptq", ...)
  int32_t bits = 0;            // GPTQ / AWQ: 2, 4 or 8 (AWQ: 4)
  int64_t group_size = 0;      // GPTQ / AWQ: input columns per scale; 0: one group per row
  int32_t zero_offset = 0;     // GPTQ: added to every stored zero point (1 for the original format)
  int64_t block_rows = 0;      // FP8 block scales: output rows and input columns per scale
  int64_t block_cols = 0;      // (0: not given; the scale tensor's shape decides)

  // "GPTQ 4-bit, groups of 128" for logs and errors.
  std::string describe() const;
};

// Reads config.json's `quantization_config` (absent or null: kNone). Methods horizon cannot load
// (bitsandbytes, exl2, int4 compressed-tensors, 3-bit GPTQ, ...) are refused, naming the field.
Result<HfQuantConfig> parse_hf_quant_config(const nlohmann::json& config, const std::string& source);

// Dequantizers. Each writes output rows [row_begin, row_end) of the matrix as nn.Linear holds it,
// [out_features][in_features] row-major, into `out` ((row_end - row_begin) * in_features floats).

// 8-bit weights with scales: w[r][c] = v(weight[r][c]) * scale[r / block_rows][c / block_cols],
// v being E4M3 (`e4m3`) or a signed byte, and `scale` [ceil(rows / block_rows)][ceil(cols /
// block_cols)] row-major (per tensor: one scale, the block the whole matrix; per row: block_rows 1,
// block_cols cols).
void dequant_scaled8_rows(const uint8_t* weight, bool e4m3, int64_t cols, const float* scale, int64_t block_rows,
                          int64_t block_cols, int64_t row_begin, int64_t row_end, float* out);

// GPTQ: qweight [in / pack][out] int32 (pack = 32 / bits values along the input, lowest bits first),
// qzeros [groups][out / pack] (along the output), scales [groups][out], g_idx [in] (null:
// input i is in group i / group_size). w[o][i] = scales[g][o] * (q - (zero + zero_offset)).
void dequant_gptq_rows(const int32_t* qweight, const int32_t* qzeros, const float* scales, const int32_t* g_idx,
                       int64_t in, int64_t out, int32_t bits, int64_t group_size, int32_t zero_offset,
                       int64_t row_begin, int64_t row_end, float* dst);

// AWQ "gemm": qweight [in][out / 8] int32 holding 8 output columns each in the interleaved order
// 0 2 4 6 1 3 5 7, qzeros [in / group_size][out / 8] likewise, scales [in / group_size][out].
// w[o][i] = (q - zero) * scale.
void dequant_awq_rows(const int32_t* qweight, const int32_t* qzeros, const float* scales, int64_t in, int64_t out,
                      int64_t group_size, int64_t row_begin, int64_t row_end, float* dst);

}  // namespace hz
