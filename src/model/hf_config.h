// Hugging Face config.json support: ModelConfig::from_hf_config (declared in model_config.h,
// defined in hf_config.cc) and the reverse, a ModelConfig as GGUF `<arch>.*` metadata.
#pragma once

#include "format/hf_tokenizer_json.h"
#include "model/model_config.h"

namespace hz {

// general.architecture, general.name and the `<arch>.*` hyper-parameters llama.cpp reads.
GgufMetadata gguf_hparams(const ModelConfig& c);

}  // namespace hz
