// Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json, generation_config.json) as
// GGUF tokenizer.ggml.* metadata, the form the tokenizer and llama.cpp-compatible files use.
// Supports BPE models: byte-level (GPT-2, Llama 3, Qwen2 pre-tokenizers) and SentencePiece-style
// with byte fallback (Llama 2, Mistral: Prepend/Replace normalizer or Metaspace pre-tokenizer).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace hz {

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

struct HfTokenizerFiles {
  const nlohmann::json* tokenizer = nullptr;          // tokenizer.json (required)
  const nlohmann::json* tokenizer_config = nullptr;   // tokenizer_config.json (optional)
  const nlohmann::json* generation_config = nullptr;  // generation_config.json (optional)
  std::string source = "tokenizer.json";              // named in errors
  int64_t min_vocab = 0;  // pad the vocabulary to this many tokens (config.json vocab_size)
  // Refuse token ids at or past this (the embedding's row count), before allocating for them;
  // 0: only the format's own limit of 2^24.
  int64_t max_vocab = 0;
};

// tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,bos/eos/unknown/eot/eom/padding
// _token_id,add_bos_token,add_eos_token,add_space_prefix} and tokenizer.chat_template.
// SentencePiece-style vocabularies get scores from merge order (earlier merge: higher score), so
// the score-driven merging reproduces the merges. Errors name the file and the field.
Result<GgufMetadata> hf_tokenizer_to_gguf(const HfTokenizerFiles& files);

}  // namespace hz
