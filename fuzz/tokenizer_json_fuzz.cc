// libFuzzer target for tokenizer.json (with an optional tokenizer_config.json after a NUL byte):
// the bounded JSON parse, the conversion to GGUF tokenizer metadata, and the tokenizer built from
// it, which then encodes a fixed text. Ids stay in range; nothing crashes.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "format/gguf.h"
#include "format/hf_tokenizer_json.h"
#include "format/json_limits.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  auto tok = hz::parse_json_bounded(all.substr(0, nul), "tokenizer.json");
  if (!tok.ok()) return 0;
  nlohmann::json cfg;
  if (nul != std::string_view::npos) {
    auto c = hz::parse_json_bounded(all.substr(nul + 1), "tokenizer_config.json");
    if (!c.ok()) return 0;
    cfg = std::move(c).value();
  }
  hz::HfTokenizerFiles files;
  files.tokenizer = &*tok;
  files.tokenizer_config = cfg.is_null() ? nullptr : &cfg;
  // As a model folder would bound it (the embedding's rows); keeps each input cheap.
  files.max_vocab = 1 << 16;
  auto kv = hz::hf_tokenizer_to_gguf(files);
  if (!kv.ok()) {
    if (kv.status().message().empty()) __builtin_trap();
    return 0;
  }
  hz::GgufWriter w;
  for (auto& [key, value] : *kv) w.set(key, std::move(value));
  std::vector<uint8_t> bytes = w.write_to_memory();
  auto f = hz::GgufFile::parse(bytes.data(), bytes.size(), "tokenizer.json");
  if (!f.ok()) __builtin_trap();  // the converter's own output must always parse
  auto t = hz::Tokenizer::from_gguf(*f);
  if (!t.ok()) return 0;
  for (int32_t id : (*t)->encode("Hello world <s> \xF0\x9F\xA6\x99 123\n", true, true)) {
    if (id < 0 || id >= (*t)->vocab_size()) __builtin_trap();
    (void)(*t)->decode({id});
  }
  return 0;
}
