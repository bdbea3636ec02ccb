// A Hugging Face model folder opened for the engine: config.json -> ModelConfig; the safetensors
// tensors, memory-mapped, under GGUF names; and a metadata-only GGUF image holding what a GGUF
// file would (hyper-parameters, tokenizer.ggml.* from tokenizer.json, the chat template, sampling
// defaults), so the tokenizer and the engine read either kind of model the same way.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "format/gguf.h"
#include "model/hf_tensor_source.h"
#include "model/model_config.h"

namespace hz {

struct HfFolder {
  std::string dir;
  ModelConfig config;
  GgufFile metadata;                        // no tensors
  std::unique_ptr<HfTensorSource> tensors;  // owns the mappings

  // `dir` must hold config.json, tokenizer.json and model.safetensors (or an index and its
  // shards); tokenizer_config.json and generation_config.json are optional.
  static Result<HfFolder> open(const std::string& dir);
};

// True when `path` is a folder holding config.json.
bool is_hf_folder(const std::string& path);

}  // namespace hz
