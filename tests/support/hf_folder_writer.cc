#include "support/hf_folder_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "format/gguf.h"
#include "format/safetensors.h"
#include "kernels/kernels.h"
#include "model/hf_tensor_source.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace hz::test {
namespace {

using json = nlohmann::ordered_json;

std::string hf_name_for(const std::string& gguf) {
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  static const std::pair<const char*, const char*> kMap[] = {
      {"attn_norm.weight", "input_layernorm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},   {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},   {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},    {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  if (gguf.rfind("blk.", 0) != 0) return "";
  size_t dot = gguf.find('.', 4);
  std::string layer = gguf.substr(4, dot - 4), rest = gguf.substr(dot + 1);
  for (const auto& [g, h] : kMap) {
    if (rest == g) return "model.layers." + layer + "." + h;
  }
  return "";
}

// GGUF rows of one head are in "adjacent pairs" order: row 2j + i holds HF row i * hd/2 + j.
std::vector<float> unpermute_rows(const std::vector<float>& w, int64_t rows, int64_t cols, int32_t num_heads) {
  std::vector<float> out(w.size());
  const int64_t hd = rows / num_heads;
  for (int32_t h = 0; h < num_heads; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < hd / 2; ++j) {
        const int64_t src = h * hd + 2 * j + i, dst = h * hd + i * (hd / 2) + j;
        std::memcpy(&out[dst * cols], &w[src * cols], cols * sizeof(float));
      }
    }
  }
  return out;
}

std::vector<uint8_t> encode(const std::vector<float>& x, const std::string& dtype) {
  std::vector<uint8_t> b;
  if (dtype == "F32") {
    b.resize(x.size() * 4);
    std::memcpy(b.data(), x.data(), b.size());
  } else {
    b.resize(x.size() * 2);
    if (dtype == "F16") kernels::f32_to_f16_row(x.data(), reinterpret_cast<uint16_t*>(b.data()), x.size());
    else kernels::f32_to_bf16_row(x.data(), reinterpret_cast<uint16_t*>(b.data()), x.size());
  }
  return b;
}

Status write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) return io_error("{}: cannot write", p.string());
  return Status();
}

// Merges of a SentencePiece vocabulary as HF's Llama conversion builds them: every split of a
// piece into two vocabulary pieces is a merge, merges ordered by the piece's score (best first).
json spm_merges(const Vocab& v) {
  json vocab = json::object();
  for (int32_t id = 0; id < v.size(); ++id) vocab[v.text(id)] = id;
  struct Merge {
    float score;
    int32_t id, left_id, right_id;
    std::string left, right;
  };
  std::vector<Merge> merges;
  for (int32_t id = 0; id < v.size(); ++id) {
    if (v.type(id) != TokenType::kNormal) continue;
    const std::string& t = v.text(id);
    std::vector<Merge> local;
    for (size_t cut = 1; cut < t.size(); ++cut) {
      if ((static_cast<uint8_t>(t[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      int32_t l = v.find(t.substr(0, cut)), r = v.find(t.substr(cut));
      if (l >= 0 && r >= 0) local.push_back({v.score(id), id, l, r, t.substr(0, cut), t.substr(cut)});
    }
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return a.left_id != b.left_id ? a.left_id < b.left_id : a.right_id < b.right_id;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merge_list = json::array();
  for (const Merge& m : merges) merge_list.push_back(m.left + " " + m.right);
  return merge_list;
}

}  // namespace

json tokenizer_json_from_gguf(const GgufFile& f, const Tokenizer& tok) {
  const Vocab& v = tok.vocab();
  const bool spm = v.kind() == VocabKind::kSpm;
  json vocab = json::object();
  for (int32_t id = 0; id < v.size(); ++id) vocab[v.text(id)] = id;
  json merge_list = json::array();
  if (spm) {
    merge_list = spm_merges(v);
  } else {
    auto m = f.get_string_array("tokenizer.ggml.merges");
    if (m.ok() && *m != nullptr) {
      for (const auto& s : **m) merge_list.push_back(s);
    }
  }

  json added = json::array();
  for (int32_t id = 0; id < v.size(); ++id) {
    TokenType t = v.type(id);
    if (t != TokenType::kControl && t != TokenType::kUnknown && t != TokenType::kUserDefined) continue;
    added.push_back({{"id", id}, {"content", v.text(id)}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", t != TokenType::kUserDefined}});
  }
  const std::string sp = "\xE2\x96\x81";
  const std::string bos = v.bos_id() >= 0 ? v.text(v.bos_id()) : "";
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  if (spm) {
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", sp}},
                                                    {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}})}};
    j["pre_tokenizer"] = nullptr;
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                                              {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  } else {
    // The published pre-tokenizers of the byte-level families.
    const std::string& pre = v.pre();
    json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
    if (pre == "llama-bpe" || pre == "qwen2") {
      const char* regex =
          pre == "qwen2"
              ? R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"
              : R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
      j["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                                                           byte_level})}};
    } else {
      byte_level["use_regex"] = true;
      byte_level["add_prefix_space"] = false;
      j["pre_tokenizer"] = byte_level;
    }
    j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  }
  if (tok.add_bos() && !bos.empty()) {
    j["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                                   {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  } else {
    j["post_processor"] = nullptr;
  }
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", v.unk_id() >= 0 ? json(v.text(v.unk_id())) : json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", spm},
                {"byte_fallback", spm},
                {"ignore_merges", v.pre() == "llama-bpe"},
                {"vocab", vocab},
                {"merges", merge_list}};
  return j;
}

namespace {

json tokenizer_config_from(const GgufFile& f, const Tokenizer& tok, int32_t max_len) {
  json tc = {{"add_bos_token", tok.add_bos()},
             {"add_eos_token", tok.add_eos()},
             {"bos_token", tok.bos_id() >= 0 ? json(tok.token_text(tok.bos_id())) : json(nullptr)},
             {"eos_token", tok.eos_id() >= 0 ? json(tok.token_text(tok.eos_id())) : json(nullptr)},
             {"unk_token", tok.vocab().unk_id() >= 0 ? json(tok.token_text(tok.vocab().unk_id())) : json(nullptr)},
             {"legacy", false},
             {"model_max_length", max_len},
             {"tokenizer_class", tok.vocab().kind() == VocabKind::kSpm ? "LlamaTokenizer" : "PreTrainedTokenizerFast"}};
  auto tmpl = f.get_string_or("tokenizer.chat_template", "");
  if (tmpl.ok() && !tmpl->empty()) tc["chat_template"] = *tmpl;
  return tc;
}

}  // namespace

json tokenizer_config_json_from_gguf(const GgufFile& f, const Tokenizer& tok) { return tokenizer_config_from(f, tok, 0); }

Status write_hf_folder(const std::string& gguf_path, const std::string& dir, const HfWriteOptions& opts) {
  namespace fs = std::filesystem;
  HZ_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(gguf_path));
  HZ_ASSIGN_OR_RETURN(ModelConfig c, ModelConfig::from_gguf(f));
  if (c.arch != "llama") return unimplemented("write_hf_folder: only llama GGUFs, not {}", c.arch);
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::from_gguf(f));
  if (tok->vocab().kind() != VocabKind::kSpm) return unimplemented("write_hf_folder: only SentencePiece vocabularies");
  std::error_code ec;
  fs::create_directories(dir, ec);

  json config = {{"architectures", {"LlamaForCausalLM"}},
                 {"model_type", "llama"},
                 {"hidden_size", c.hidden},
                 {"intermediate_size", c.ffn},
                 {"num_attention_heads", c.num_heads},
                 {"num_hidden_layers", c.num_layers},
                 {"num_key_value_heads", c.num_kv_heads},
                 {"max_position_embeddings", c.train_ctx},
                 {"rms_norm_eps", c.rms_eps},
                 {"rope_theta", c.rope.freq_base},
                 {"rope_scaling", nullptr},
                 {"vocab_size", c.vocab},
                 {"tie_word_embeddings", c.tied_embeddings},
                 {"bos_token_id", tok->bos_id()},
                 {"eos_token_id", tok->eos_id()},
                 {"torch_dtype", opts.dtype == "F32" ? "float32" : opts.dtype == "F16" ? "float16" : "bfloat16"}};
  HZ_RETURN_IF_ERROR(write_text(fs::path(dir) / "config.json", config.dump(2)));

  // Tensors, in GGUF order, split into contiguous runs per shard.
  const auto& tensors = f.tensors();
  const int shards = std::max(1, opts.num_shards);
  std::vector<SafetensorsWriter> writers(shards);
  json weight_map = json::object();
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    std::string hf = hf_name_for(t.name);
    if (hf.empty() || gguf_name_for_hf(hf) != t.name) return unimplemented("write_hf_folder: no HF name for tensor '{}'", t.name);
    const int64_t cols = static_cast<int64_t>(t.dims[0]);
    const int64_t rows = static_cast<int64_t>(t.num_elements() / t.dims[0]);
    std::vector<float> x(t.num_elements());
    for (int64_t r = 0; r < rows; ++r) kernels::dequantize_row(t.dtype, t.data + r * row_bytes(t.dtype, cols), &x[r * cols], cols);
    if (t.name.find("attn_q.weight") != std::string::npos) x = unpermute_rows(x, rows, cols, c.num_heads);
    if (t.name.find("attn_k.weight") != std::string::npos) x = unpermute_rows(x, rows, cols, c.num_kv_heads);
    const std::string dtype = t.dims.size() >= 2 ? opts.dtype : "F32";
    std::vector<uint64_t> shape(t.dims.rbegin(), t.dims.rend());
    std::vector<uint8_t> bytes = encode(x, dtype);
    total_bytes += bytes.size();
    const int shard = static_cast<int>(i * shards / tensors.size());
    writers[shard].add(hf, dtype, shape, std::move(bytes));
    weight_map[hf] = shards == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, shards);
  }
  for (int s = 0; s < shards; ++s) {
    writers[s].set_metadata("format", "pt");
    std::string name = shards == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards);
    HZ_RETURN_IF_ERROR(writers[s].write((fs::path(dir) / name).string()));
  }
  if (shards > 1) {
    json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    HZ_RETURN_IF_ERROR(write_text(fs::path(dir) / "model.safetensors.index.json", index.dump(2)));
  }

  HZ_RETURN_IF_ERROR(write_text(fs::path(dir) / "tokenizer.json", tokenizer_json_from_gguf(f, *tok).dump(2)));
  if (opts.write_tokenizer_config) {
    HZ_RETURN_IF_ERROR(write_text(fs::path(dir) / "tokenizer_config.json", tokenizer_config_from(f, *tok, c.train_ctx).dump(2)));
  }
  json gen = {{"bos_token_id", tok->bos_id()}, {"eos_token_id", tok->eos_id()}, {"do_sample", true}, {"temperature", 0.7}, {"top_p", 0.9}};
  HZ_RETURN_IF_ERROR(write_text(fs::path(dir) / "generation_config.json", gen.dump(2)));
  return Status();
}

}  // namespace hz::test
