// Model quantizer: copies a GGUF model, or converts a Hugging Face folder, to a GGUF with its weight
// matrices re-encoded (Q8_0, Q4_0, F16...), norms and other vectors kept, metadata copied (for a
// folder: written from config.json and tokenizer.json). Streams tensor by tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace hz {

// llama.cpp's k-quant mixes (llama-quantize's Q4_K_S ... Q5_K_M): most matrices in the base type,
// some raised where quality needs it (output head Q6_K; attn_v and ffn_down of some layers).
enum class QuantMix { kUniform, kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M };

struct QuantizeOptions {
  DType type = DType::kQ8_0;                // matrices (a mix's base type: Q4_K or Q5_K)
  QuantMix mix = QuantMix::kUniform;
  std::optional<DType> embeddings_type;     // token_embd.weight (default: `type`)
  std::optional<DType> output_type;         // output.weight (default: `type`)
  // Matrices whose rows are not a multiple of the block size fall back to this type (k-quants:
  // first to Q8_0 when the rows are a multiple of 32), with a warning naming the tensor.
  DType fallback_type = DType::kF16;
};

// What was written: tensors and bytes per type, and one warning per tensor that fell back.
struct QuantizeSummary {
  struct Row {
    DType type;
    int64_t num_tensors = 0;
    uint64_t bytes = 0;
  };
  std::vector<Row> by_type;  // in order of first appearance
  std::vector<std::string> warnings;
};

// Where a matrix sits, for the mix rules.
struct MixPosition {
  std::string name;          // GGUF tensor name
  int32_t layer_idx = -1;    // from "blk.N.", -1 outside the layers
  int32_t num_layers = 0;
  int32_t num_experts = 0;
  bool has_output = true;    // false: the head is tied to token_embd.weight
};
// The type `mix` gives one matrix (before the row-size fallback); `base` for kUniform.
DType mix_tensor_type(QuantMix mix, DType base, const MixPosition& p);

// Reads `in_path` (a GGUF with F32/F16/BF16 or already-quantized tensors, which are re-encoded
// through f32, or an HF folder, whose llama Q/K rows are permuted back to GGUF order) and writes
// `out_path`. `progress(done, total)` may be null.
Status quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opts,
                      const std::function<void(size_t, size_t)>& progress = nullptr, QuantizeSummary* summary = nullptr);

}  // namespace hz
