#include "model/hf_folder.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "base/mapped_file.h"
#include "format/hf_tokenizer_json.h"
#include "format/json_limits.h"
#include "model/hf_config.h"

namespace hz {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Parses a JSON file; a missing optional file gives null.
Result<json> read_json(const fs::path& p, bool required) {
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    if (required) return not_found("{}: missing (required in a Hugging Face model folder)", p.string());
    return json();
  }
  HZ_ASSIGN_OR_RETURN(std::string text, read_file(p.string()));
  HZ_ASSIGN_OR_RETURN(json j, parse_json_bounded(text, p.string()));
  if (!j.is_object()) return data_loss("{}: not a JSON object", p.string());
  return j;
}

// generation_config.json's sampling defaults, under llama.cpp's general.sampling.* keys.
void add_sampling_defaults(const json& gen, GgufMetadata* kv) {
  if (!gen.is_object()) return;
  if (gen.contains("do_sample") && gen["do_sample"].is_boolean() && !gen["do_sample"].get<bool>()) {
    kv->emplace_back("general.sampling.temp", GgufValue::make_f32(0.0f));
    return;
  }
  if (gen.contains("temperature") && gen["temperature"].is_number())
    kv->emplace_back("general.sampling.temp", GgufValue::make_f32(gen["temperature"].get<float>()));
  if (gen.contains("top_p") && gen["top_p"].is_number())
    kv->emplace_back("general.sampling.top_p", GgufValue::make_f32(gen["top_p"].get<float>()));
  if (gen.contains("min_p") && gen["min_p"].is_number())
    kv->emplace_back("general.sampling.min_p", GgufValue::make_f32(gen["min_p"].get<float>()));
  if (gen.contains("repetition_penalty") && gen["repetition_penalty"].is_number())
    kv->emplace_back("general.sampling.penalty_repeat", GgufValue::make_f32(gen["repetition_penalty"].get<float>()));
  if (gen.contains("top_k") && gen["top_k"].is_number_integer() && gen["top_k"].get<int64_t>() >= 0)
    kv->emplace_back("general.sampling.top_k", GgufValue::make_i32(static_cast<int32_t>(std::min<int64_t>(gen["top_k"].get<int64_t>(), INT32_MAX))));
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

Result<HfFolder> HfFolder::open(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return not_found("{}: not a folder", dir);
  HZ_ASSIGN_OR_RETURN(json config, read_json(root / "config.json", true));
  HZ_ASSIGN_OR_RETURN(json tok, read_json(root / "tokenizer.json", true));
  HZ_ASSIGN_OR_RETURN(json tok_cfg, read_json(root / "tokenizer_config.json", false));
  HZ_ASSIGN_OR_RETURN(json gen, read_json(root / "generation_config.json", false));

  HZ_ASSIGN_OR_RETURN(ModelConfig cfg, ModelConfig::from_hf_config(config, (root / "config.json").string()));
  std::string base = root.filename().string();
  if (base.empty()) base = root.parent_path().filename().string();
  cfg.name = base;
  HZ_ASSIGN_OR_RETURN(HfQuantConfig quant, parse_hf_quant_config(config, (root / "config.json").string()));
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<HfTensorSource> tensors, HfTensorSource::open(dir, quant));
  cfg.tied_embeddings = tensors->get_tensor("output.weight") == nullptr;
  // The embedding's shape bounds the vocabulary: checked before anything is sized by config.json's
  // vocab_size or by tokenizer.json's ids, so a hostile folder cannot make either allocate.
  const TensorInfo* embd = tensors->get_tensor("token_embd.weight");
  if (embd == nullptr) return not_found("{}: no model.embed_tokens.weight tensor", dir);
  if (embd->dims.size() != 2 || embd->dims[0] != static_cast<uint64_t>(cfg.hidden) ||
      embd->dims[1] != static_cast<uint64_t>(cfg.vocab))
    return data_loss("{}: vocab_size {} and hidden_size {} do not match model.embed_tokens.weight's shape {}",
                     (root / "config.json").string(), cfg.vocab, cfg.hidden, embd->shape_string());

  HfTokenizerFiles files;
  files.tokenizer = &tok;
  files.tokenizer_config = tok_cfg.is_null() ? nullptr : &tok_cfg;
  files.generation_config = gen.is_null() ? nullptr : &gen;
  files.source = (root / "tokenizer.json").string();
  files.min_vocab = cfg.vocab;
  files.max_vocab = cfg.vocab;
  HZ_ASSIGN_OR_RETURN(GgufMetadata kv, hf_tokenizer_to_gguf(files));
  GgufMetadata all = gguf_hparams(cfg);
  all.insert(all.end(), std::make_move_iterator(kv.begin()), std::make_move_iterator(kv.end()));
  add_sampling_defaults(gen, &all);

  GgufWriter w;
  for (auto& [key, value] : all) w.set(key, std::move(value));
  // Parsing copies every value out of the image, so it need not outlive the GgufFile.
  std::vector<uint8_t> image = w.write_to_memory();
  HZ_ASSIGN_OR_RETURN(GgufFile meta, GgufFile::parse(image.data(), image.size(), dir));
  return HfFolder{dir, std::move(cfg), std::move(meta), std::move(tensors)};
}

}  // namespace hz
