// Test utility: writes a Hugging Face model folder (config.json, safetensors, tokenizer.json,
// tokenizer_config.json, generation_config.json) from a llama GGUF with F32/F16 tensors, undoing
// the GGUF converter's Q/K row permutation so the folder looks like a real HF checkpoint.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "base/status.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace hz::test {

struct HfWriteOptions {
  int num_shards = 1;              // 1: model.safetensors; >1: shards + model.safetensors.index.json
  std::string dtype = "F32";       // "F32", "F16" or "BF16" for the matrices (norms stay F32)
  bool write_tokenizer_config = true;
};

// tokenizer.json of a GGUF vocabulary: SentencePiece-style BPE with byte fallback (merges from the
// scores, as HF's Llama conversion derives them) or byte-level BPE (gpt-2, llama-bpe, qwen2 pre).
nlohmann::ordered_json tokenizer_json_from_gguf(const GgufFile& f, const Tokenizer& tok);
nlohmann::ordered_json tokenizer_config_json_from_gguf(const GgufFile& f, const Tokenizer& tok);

Status write_hf_folder(const std::string& gguf_path, const std::string& dir, const HfWriteOptions& opts = {});

}  // namespace hz::test
