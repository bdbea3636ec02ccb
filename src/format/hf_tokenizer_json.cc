#include "format/hf_tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

namespace hz {
namespace {

using json = nlohmann::json;

// GGUF token types, as tokenizer/vocab.h (the format layer does not include the tokenizer).
enum TokType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

// Pre-tokenizer regexes as published in tokenizer.json files -> tokenizer.ggml.pre names.
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Sequences nest a few levels in real files; the bound keeps a hostile file from exhausting the
// stack even when the JSON did not come through parse_json_bounded.
constexpr int kMaxSequenceDepth = 16;

// Calls f on `node` and, for Sequence nodes, on each element of `list_key` (recursively).
template <typename F>
Status walk(const json& node, const char* list_key, const std::string& src, F&& f, int depth = 0) {
  if (!node.is_object()) return Status();
  if (depth > kMaxSequenceDepth)
    return data_loss("{}: '{}' Sequences nest deeper than {} levels", src, list_key, kMaxSequenceDepth);
  f(node);
  auto it = node.find(list_key);
  auto type = node.find("type");
  if (type != node.end() && *type == "Sequence" && it != node.end() && it->is_array()) {
    for (const auto& child : *it) HZ_RETURN_IF_ERROR(walk(child, list_key, src, f, depth + 1));
  }
  return Status();
}

std::string str_or(const json& j, const char* key, const std::string& def) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

// A special token in tokenizer_config.json: "text" or {"content": "text", ...}.
std::optional<std::string> token_content(const json& cfg, const char* key) {
  if (!cfg.is_object()) return std::nullopt;
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

class Converter {
 public:
  explicit Converter(const HfTokenizerFiles& f) : f_(f), src_(f.source) {}

  Result<GgufMetadata> run() {
    const json& tok = *f_.tokenizer;
    if (!tok.is_object()) return data_loss("{}: not a JSON object", src_);
    auto model_it = tok.find("model");
    if (model_it == tok.end() || !model_it->is_object()) return data_loss("{}: 'model' is missing or not an object", src_);
    const json& model = *model_it;
    const std::string type = str_or(model, "type", "BPE");
    if (type != "BPE")
      return unimplemented("{}: model.type '{}' is not supported (supported: BPE, byte-level or with byte fallback)", src_, type);
    HZ_RETURN_IF_ERROR(read_vocab(model, tok));
    HZ_RETURN_IF_ERROR(read_merges(model));
    HZ_RETURN_IF_ERROR(classify(tok, model));
    HZ_RETURN_IF_ERROR(assign_types(model));
    if (spm_) assign_scores();
    HZ_RETURN_IF_ERROR(special_ids(tok, model));
    emit();
    return std::move(out_);
  }

 private:
  Status read_vocab(const json& model, const json& tok) {
    auto v = model.find("vocab");
    if (v == model.end() || !v->is_object()) return data_loss("{}: model.vocab is missing or not an object", src_);
    std::map<int64_t, std::string> by_id;
    auto put = [&](const std::string& text, const json& idj, const std::string& field) -> Status {
      if (!idj.is_number_integer()) return data_loss("{}: {} has a non-integer id", src_, field);
      int64_t id = idj.get<int64_t>();
      if (id < 0 || id >= (int64_t{1} << 24)) return data_loss("{}: {} id {} is out of range", src_, field, id);
      if (f_.max_vocab > 0 && id >= f_.max_vocab)
        return data_loss("{}: {} id {} is outside the model's {}-token vocabulary (the embedding's rows)", src_, field,
                         id, f_.max_vocab);
      auto [it, fresh] = by_id.emplace(id, text);
      if (!fresh && it->second != text)
        return data_loss("{}: {}: id {} is given to both '{}' and '{}'", src_, field, id, it->second, text);
      return Status();
    };
    for (const auto& [text, idj] : v->items()) HZ_RETURN_IF_ERROR(put(text, idj, fmt::format("model.vocab['{}']", text)));
    auto added = tok.find("added_tokens");
    if (added != tok.end() && !added->is_null()) {
      if (!added->is_array()) return data_loss("{}: 'added_tokens' is not an array", src_);
      for (size_t i = 0; i < added->size(); ++i) {
        const json& a = (*added)[i];
        const std::string field = fmt::format("added_tokens[{}]", i);
        if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
          return data_loss("{}: {} needs 'id' and string 'content'", src_, field);
        const std::string content = a["content"].get<std::string>();
        HZ_RETURN_IF_ERROR(put(content, a["id"], field));
        added_[a["id"].get<int64_t>()] = a.value("special", false);
      }
    }
    if (by_id.empty()) return data_loss("{}: model.vocab is empty", src_);
    const int64_t n = std::max<int64_t>(by_id.rbegin()->first + 1, f_.min_vocab);
    tokens_.resize(n);
    types_.assign(n, kNormal);
    present_.assign(n, false);
    for (auto& [id, text] : by_id) {
      tokens_[id] = text;
      present_[id] = true;
    }
    // Holes (and padding up to config.json's vocab_size) become unused placeholders, as
    // llama.cpp's converter writes them.
    for (int64_t id = 0; id < n; ++id) {
      if (!present_[id]) {
        tokens_[id] = fmt::format("[PAD{}]", id);
        types_[id] = kUnused;
      }
    }
    for (int64_t id = 0; id < n; ++id) text_to_id_.emplace(tokens_[id], static_cast<int32_t>(id));
    return Status();
  }

  Status read_merges(const json& model) {
    auto m = model.find("merges");
    if (m == model.end() || m->is_null()) return Status();
    if (!m->is_array()) return data_loss("{}: model.merges is not an array", src_);
    merges_.reserve(m->size());
    for (size_t i = 0; i < m->size(); ++i) {
      const json& e = (*m)[i];
      std::string left, right;
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        size_t pos = s.find(' ', 1);
        if (pos == std::string::npos || pos + 1 >= s.size())
          return data_loss("{}: model.merges[{}] = '{}' is not two symbols separated by a space", src_, i, s);
        left = s.substr(0, pos);
        right = s.substr(pos + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        left = e[0].get<std::string>();
        right = e[1].get<std::string>();
        if (left.empty() || right.empty() || left.find(' ') != std::string::npos || right.find(' ') != std::string::npos)
          return unimplemented("{}: model.merges[{}] has a symbol with a space, which GGUF merges cannot express", src_, i);
      } else {
        return data_loss("{}: model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", src_, i);
      }
      merges_.push_back(left + " " + right);
    }
    return Status();
  }

  // Byte-level (GPT-2 alphabet) or SentencePiece-style (U+2581 spaces, <0xNN> byte fallback).
  Status classify(const json& tok, const json& model) {
    bool byte_level = false;
    std::vector<std::string> regexes;
    bool other_step = false;
    std::string other_name;
    auto pre = tok.find("pre_tokenizer");
    if (pre != tok.end() && !pre->is_null()) {
      HZ_RETURN_IF_ERROR(walk(*pre, "pretokenizers", src_, [&](const json& node) {
        const std::string t = str_or(node, "type", "");
        if (t == "Sequence") return;
        if (t == "ByteLevel") {
          byte_level = true;
          if (node.value("use_regex", true)) regexes.push_back(kGpt2Regex);
        } else if (t == "Split" && node.contains("pattern") && node["pattern"].is_object()) {
          regexes.push_back(str_or(node["pattern"], "Regex", str_or(node["pattern"], "String", "")));
        } else if (t == "Metaspace") {
          metaspace_ = true;
          const std::string scheme = str_or(node, "prepend_scheme", node.value("add_prefix_space", true) ? "always" : "never");
          space_prefix_ = scheme != "never";
        } else {
          other_step = true;
          other_name = t;
        }
      }));
    }
    auto dec = tok.find("decoder");
    if (dec != tok.end() && !dec->is_null()) {
      HZ_RETURN_IF_ERROR(walk(*dec, "decoders", src_, [&](const json& node) {
        if (str_or(node, "type", "") == "ByteLevel") byte_level = true;
      }));
    }
    bool prepend = false, replace_space = false;
    auto norm = tok.find("normalizer");
    if (norm != tok.end() && !norm->is_null()) {
      HZ_RETURN_IF_ERROR(walk(*norm, "normalizers", src_, [&](const json& node) {
        const std::string t = str_or(node, "type", "");
        if (t == "Prepend" && str_or(node, "prepend", "") == kSpaceMark) prepend = true;
        if (t == "Replace" && node.contains("pattern") && node["pattern"].is_object() &&
            str_or(node["pattern"], "String", "") == " " && str_or(node, "content", "") == kSpaceMark)
          replace_space = true;
      }));
    }
    const bool byte_fallback = model.value("byte_fallback", false);
    if (byte_level) {
      if (other_step) return unimplemented("{}: pre_tokenizer step '{}' is not supported", src_, other_name);
      spm_ = false;
      if (regexes.size() == 1 && regexes[0] == kLlama3Regex) {
        pre_ = "llama-bpe";
      } else if (regexes.size() == 1 && regexes[0] == kQwen2Regex) {
        pre_ = "qwen2";
      } else if (regexes.size() == 1 && regexes[0] == kGpt2Regex) {
        pre_ = "gpt-2";
      } else {
        return unimplemented("{}: pre_tokenizer (regexes {}) is not one of the known byte-level families "
                             "(GPT-2, Llama 3, Qwen2)", src_, json(regexes).dump().substr(0, 200));
      }
      if (merges_.empty()) return data_loss("{}: model.merges is missing or empty (required by byte-level BPE)", src_);
      return Status();
    }
    if (byte_fallback || prepend || replace_space || metaspace_) {
      if (other_step) return unimplemented("{}: pre_tokenizer step '{}' is not supported", src_, other_name);
      spm_ = true;
      if (!metaspace_) space_prefix_ = prepend;
      return Status();
    }
    return unimplemented("{}: the tokenizer is neither byte-level (ByteLevel pre-tokenizer/decoder) nor "
                         "SentencePiece-style (byte_fallback, Metaspace or a '\u2581' normalizer)", src_);
  }

  Status assign_types(const json& model) {
    const std::string unk = str_or(model, "unk_token", "");
    for (size_t id = 0; id < tokens_.size(); ++id) {
      if (!present_[id]) continue;
      auto a = added_.find(static_cast<int64_t>(id));
      if (a != added_.end()) {
        types_[id] = a->second ? kControl : kUserDefined;
      } else if (spm_ && is_byte_token(tokens_[id])) {
        types_[id] = kByte;
      } else if (!unk.empty() && tokens_[id] == unk) {
        types_[id] = kUnknown;
      }
    }
    if (!unk.empty()) {
      auto it = text_to_id_.find(unk);
      if (it == text_to_id_.end()) return data_loss("{}: model.unk_token '{}' is not in the vocabulary", src_, unk);
      unk_id_ = it->second;
      types_[unk_id_] = kUnknown;
    }
    return Status();
  }

  // Score of a merged token = -(rank of the first merge producing it): the highest score is the
  // earliest merge, which is what score-driven merging picks first. Other tokens (characters,
  // bytes, specials) never result from a merge; they rank below every merge result.
  void assign_scores() {
    const float kBelowAll = -static_cast<float>(merges_.size()) - 1.0f;
    scores_.assign(tokens_.size(), kBelowAll);
    for (size_t r = merges_.size(); r-- > 0;) {
      std::string merged = merges_[r];
      merged.erase(merged.find(' '), 1);
      auto it = text_to_id_.find(merged);
      if (it != text_to_id_.end()) scores_[it->second] = -static_cast<float>(r);
    }
    for (size_t id = 0; id < tokens_.size(); ++id) {
      if (types_[id] != kNormal) scores_[id] = 0.0f;
    }
  }

  Result<int32_t> id_of(const std::string& text, const std::string& field) const {
    auto it = text_to_id_.find(text);
    if (it == text_to_id_.end()) return data_loss("{}: {} '{}' is not in the vocabulary", src_, field, text);
    return it->second;
  }

  Status special_ids(const json& tok, const json& model) {
    static const json kEmpty = json::object();
    const json& cfg = f_.tokenizer_config ? *f_.tokenizer_config : kEmpty;
    const json& gen = f_.generation_config ? *f_.generation_config : kEmpty;
    if (!cfg.is_object()) return data_loss("tokenizer_config.json: not a JSON object");
    if (!gen.is_object()) return data_loss("generation_config.json: not a JSON object");
    const int64_t n = static_cast<int64_t>(tokens_.size());
    auto gen_id = [&](const json& j, const char* field) -> Result<int32_t> {
      if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() >= n)
        return data_loss("generation_config.json: '{}' = {} is not a token id of the {}-token vocabulary", field, j.dump(), n);
      return static_cast<int32_t>(j.get<int64_t>());
    };
    if (auto b = token_content(cfg, "bos_token")) {
      HZ_ASSIGN_OR_RETURN(bos_id_, id_of(*b, "tokenizer_config.json bos_token"));
    } else if (gen.contains("bos_token_id") && !gen["bos_token_id"].is_null()) {
      HZ_ASSIGN_OR_RETURN(bos_id_, gen_id(gen["bos_token_id"], "bos_token_id"));
    }
    if (auto e = token_content(cfg, "eos_token")) {
      HZ_ASSIGN_OR_RETURN(int32_t id, id_of(*e, "tokenizer_config.json eos_token"));
      eos_ids_.push_back(id);
    }
    if (gen.contains("eos_token_id") && !gen["eos_token_id"].is_null()) {
      const json& e = gen["eos_token_id"];
      std::vector<json> list = e.is_array() ? std::vector<json>(e.begin(), e.end()) : std::vector<json>{e};
      for (const json& x : list) {
        HZ_ASSIGN_OR_RETURN(int32_t id, gen_id(x, "eos_token_id"));
        if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
      }
    }
    if (auto p = token_content(cfg, "pad_token")) {
      auto it = text_to_id_.find(*p);
      if (it != text_to_id_.end()) pad_id_ = it->second;
    }
    if (auto u = token_content(cfg, "unk_token")) {
      auto it = text_to_id_.find(*u);
      if (it != text_to_id_.end()) unk_id_ = it->second;
    }

    // BOS/EOS insertion: tokenizer_config.json's flags, else what the post-processor template adds.
    auto post = tok.find("post_processor");
    if (post != tok.end() && !post->is_null()) {
      HZ_RETURN_IF_ERROR(walk(*post, "processors", src_, [&](const json& node) {
        if (str_or(node, "type", "") != "TemplateProcessing" || !node.contains("single") || !node["single"].is_array()) return;
        const json& single = node["single"];
        auto special_at = [&](const json& item) -> std::string {
          if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object())
            return str_or(item["SpecialToken"], "id", "");
          return "";
        };
        if (!single.empty() && bos_id_ >= 0 && special_at(single.front()) == tokens_[bos_id_]) post_bos_ = true;
        if (!single.empty() && !eos_ids_.empty() && special_at(single.back()) == tokens_[eos_ids_[0]]) post_eos_ = true;
      }));
    }
    add_bos_ = post_bos_;
    add_eos_ = post_eos_;
    if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) add_bos_ = cfg["add_bos_token"].get<bool>();
    if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()) add_eos_ = cfg["add_eos_token"].get<bool>();
    if (add_bos_ && bos_id_ < 0) return data_loss("tokenizer_config.json: add_bos_token is set but there is no bos_token");
    if (add_eos_ && eos_ids_.empty()) return data_loss("tokenizer_config.json: add_eos_token is set but there is no eos_token");

    auto tmpl = cfg.find("chat_template");
    if (tmpl != cfg.end() && tmpl->is_string()) {
      chat_template_ = tmpl->get<std::string>();
    } else if (tmpl != cfg.end() && tmpl->is_array()) {
      // Named templates: [{"name": "default", "template": "..."}, {"name": "tool_use", ...}].
      for (const json& t : *tmpl) {
        if (t.is_object() && str_or(t, "name", "") == "default") chat_template_ = str_or(t, "template", "");
      }
    }
    (void)model;
    return Status();
  }

  void emit() {
    auto set = [&](const char* key, GgufValue v) { out_.emplace_back(key, std::move(v)); };
    set("tokenizer.ggml.model", GgufValue::make_str(spm_ ? "llama" : "gpt2"));
    if (!spm_) set("tokenizer.ggml.pre", GgufValue::make_str(pre_));
    set("tokenizer.ggml.tokens", GgufValue::make_str_array(tokens_));
    if (spm_) set("tokenizer.ggml.scores", GgufValue::make_f32_array(scores_));
    set("tokenizer.ggml.token_type", GgufValue::make_i32_array(types_));
    if (!spm_) set("tokenizer.ggml.merges", GgufValue::make_str_array(merges_));
    // -1 (0xFFFFFFFF as u32) is GGUF's "no such token"; written explicitly so that the
    // SentencePiece defaults (<s> = 1, </s> = 2) do not apply to a vocabulary that lacks them.
    auto id = [](int32_t v) { return GgufValue::make_u32(v < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(v)); };
    set("tokenizer.ggml.bos_token_id", id(bos_id_));
    set("tokenizer.ggml.eos_token_id", id(eos_ids_.empty() ? -1 : eos_ids_[0]));
    set("tokenizer.ggml.unknown_token_id", id(unk_id_));
    if (pad_id_ >= 0) set("tokenizer.ggml.padding_token_id", id(pad_id_));
    // Further end-of-generation ids (generation_config.json lists up to three for Llama 3).
    if (eos_ids_.size() > 1) set("tokenizer.ggml.eot_token_id", id(eos_ids_[1]));
    if (eos_ids_.size() > 2) set("tokenizer.ggml.eom_token_id", id(eos_ids_[2]));
    set("tokenizer.ggml.add_bos_token", GgufValue::make_bool(add_bos_));
    set("tokenizer.ggml.add_eos_token", GgufValue::make_bool(add_eos_));
    if (spm_) set("tokenizer.ggml.add_space_prefix", GgufValue::make_bool(space_prefix_));
    if (!chat_template_.empty()) set("tokenizer.chat_template", GgufValue::make_str(chat_template_));
  }

  const HfTokenizerFiles& f_;
  std::string src_;
  std::vector<std::string> tokens_;
  std::vector<int32_t> types_;
  std::vector<bool> present_;
  std::vector<float> scores_;
  std::vector<std::string> merges_;
  std::map<int64_t, bool> added_;  // id -> special
  std::map<std::string, int32_t> text_to_id_;
  bool spm_ = false;
  bool metaspace_ = false;
  bool space_prefix_ = false;
  std::string pre_;
  int32_t bos_id_ = -1, unk_id_ = -1, pad_id_ = -1;
  std::vector<int32_t> eos_ids_;
  bool post_bos_ = false, post_eos_ = false, add_bos_ = false, add_eos_ = false;
  std::string chat_template_;
  GgufMetadata out_;
};

}  // namespace

Result<GgufMetadata> hf_tokenizer_to_gguf(const HfTokenizerFiles& files) {
  if (files.tokenizer == nullptr) return invalid_argument("{}: no tokenizer.json given", files.source);
  try {
    return Converter(files).run();
  } catch (const nlohmann::json::exception& e) {
    // Every field is type-checked before use; this is a backstop for a shape not foreseen.
    return data_loss("{}: unexpected JSON structure: {}", files.source, e.what());
  }
}

}  // namespace hz
