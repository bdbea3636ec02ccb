// Model quantizer: copies a GGUF model, or converts a Hugging Face folder, to a GGUF with its weight
// matrices re-encoded (Q8_0, Q4_0, F16...), norms and other vectors kept, metadata copied (for a
// folder: written from config.json and tokenizer.json). Streams tensor by tensor.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "tensor/dtype.h"

namespace hz {

struct QuantizeOptions {
  DType type = DType::kQ8_0;                // matrices
  std::optional<DType> embeddings_type;     // token_embd.weight (default: `type`)
  std::optional<DType> output_type;         // output.weight (default: `type`)
  // Matrices whose rows are not a multiple of the block size fall back to this type (k-quants:
  // first to Q8_0 when the rows are a multiple of 32, as llama.cpp does).
  DType fallback_type = DType::kF16;
};

// Reads `in_path` (a GGUF with F32/F16/BF16 or already-quantized tensors, which are re-encoded
// through f32, or an HF folder, whose llama Q/K rows are permuted back to GGUF order) and writes
// `out_path`. `progress(done, total)` may be null.
Status quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opts,
                      const std::function<void(size_t, size_t)>& progress = nullptr);

}  // namespace hz
