// Tokenizer::from_hf: Hugging Face tokenizer files through their GGUF metadata form.
#include <nlohmann/json.hpp>

#include "format/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace hz {

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf(const nlohmann::json& tokenizer, const nlohmann::json& tokenizer_config) {
  HfTokenizerFiles files;
  files.tokenizer = &tokenizer;
  if (!tokenizer_config.is_null()) files.tokenizer_config = &tokenizer_config;
  HZ_ASSIGN_OR_RETURN(GgufMetadata kv, hf_tokenizer_to_gguf(files));
  GgufWriter w;
  for (auto& [key, value] : kv) w.set(key, std::move(value));
  // A metadata-only GGUF image: parsing copies every value out, so the bytes can go afterwards.
  std::vector<uint8_t> bytes = w.write_to_memory();
  HZ_ASSIGN_OR_RETURN(GgufFile f, GgufFile::parse(bytes.data(), bytes.size(), "tokenizer.json"));
  return from_gguf(f);
}

}  // namespace hz
