// ModelConfig from a Hugging Face config.json, and back to GGUF hyper-parameter metadata.
#include "model/hf_config.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace hz {
namespace {

using json = nlohmann::json;

class Fields {
 public:
  Fields(const json& j, const std::string& source) : j_(j), source_(source) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  Result<int32_t> i32(const char* key, std::optional<int64_t> def, int64_t lo, int64_t hi) const {
    int64_t v;
    if (!has(key)) {
      if (!def) return not_found("{}: required field '{}' is missing", source_, key);
      v = *def;
    } else {
      const json& x = j_[key];
      if (!x.is_number_integer()) return data_loss("{}: field '{}' must be an integer, got {}", source_, key, x.dump());
      v = x.get<int64_t>();
    }
    if (v < lo || v > hi) return data_loss("{}: field '{}' = {} is outside [{}, {}]", source_, key, v, lo, hi);
    return static_cast<int32_t>(v);
  }
  Result<double> num(const json& obj, const char* key, double def, const char* prefix = "") const {
    if (!obj.contains(key) || obj[key].is_null()) return def;
    if (!obj[key].is_number()) return data_loss("{}: field '{}{}' must be a number, got {}", source_, prefix, key, obj[key].dump());
    return obj[key].get<double>();
  }
  Result<bool> boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j_[key].is_boolean()) return data_loss("{}: field '{}' must be true or false, got {}", source_, key, j_[key].dump());
    return j_[key].get<bool>();
  }

 private:
  const json& j_;
  const std::string& source_;
};

Status read_rope_scaling(const json& rs, const Fields& f, const std::string& source, ModelConfig* c) {
  if (!rs.is_object()) return data_loss("{}: field 'rope_scaling' must be an object or null", source);
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    if (rs.contains(k) && rs[k].is_string()) {
      type = rs[k].get<std::string>();
      break;
    }
  }
  RopeConfig& r = c->rope;
  HZ_ASSIGN_OR_RETURN(double factor, f.num(rs, "factor", 1.0, "rope_scaling."));
  if (!(factor > 0)) return data_loss("{}: rope_scaling.factor = {} must be > 0", source, factor);
  HZ_ASSIGN_OR_RETURN(double orig, f.num(rs, "original_max_position_embeddings", c->train_ctx, "rope_scaling."));
  if (!(orig >= 1 && orig <= (1 << 30))) return data_loss("{}: rope_scaling.original_max_position_embeddings = {} is out of range", source, orig);
  if (type.empty() || type == "default") return Status();
  if (type == "linear") {
    r.scaling = RopeScaling::kLinear;
    r.freq_scale = static_cast<float>(1.0 / factor);
  } else if (type == "yarn") {
    r.scaling = RopeScaling::kYarn;
    r.freq_scale = static_cast<float>(1.0 / factor);
    r.orig_ctx = static_cast<int32_t>(orig);
    r.ext_factor = 1.0f;
    HZ_ASSIGN_OR_RETURN(double bf, f.num(rs, "beta_fast", 32.0, "rope_scaling."));
    HZ_ASSIGN_OR_RETURN(double bs, f.num(rs, "beta_slow", 1.0, "rope_scaling."));
    r.beta_fast = static_cast<float>(bf);
    r.beta_slow = static_cast<float>(bs);
    HZ_ASSIGN_OR_RETURN(double af, f.num(rs, "attention_factor", 0.0, "rope_scaling."));
    // YaRN's default magnitude scaling: 0.1 ln(s) + 1.
    r.attn_factor = af > 0 ? static_cast<float>(af) : static_cast<float>(0.1 * std::log(factor) + 1.0);
  } else if (type == "llama3") {
    r.scaling = RopeScaling::kLlama3;
    r.freq_scale = static_cast<float>(1.0 / factor);
    r.orig_ctx = static_cast<int32_t>(orig);
    HZ_ASSIGN_OR_RETURN(double lo, f.num(rs, "low_freq_factor", 1.0, "rope_scaling."));
    HZ_ASSIGN_OR_RETURN(double hi, f.num(rs, "high_freq_factor", 4.0, "rope_scaling."));
    if (!(hi > lo)) return data_loss("{}: rope_scaling.high_freq_factor {} must exceed low_freq_factor {}", source, hi, lo);
    r.low_freq_factor = static_cast<float>(lo);
    r.high_freq_factor = static_cast<float>(hi);
  } else {
    return unimplemented("{}: rope_scaling type '{}' is not supported (supported: linear, yarn, llama3)", source, type);
  }
  return Status();
}

}  // namespace

Result<ModelConfig> ModelConfig::from_hf_config(const json& j, const std::string& source) {
  if (!j.is_object()) return data_loss("{}: not a JSON object", source);
  std::string model_type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  if (model_type.empty()) return not_found("{}: field 'model_type' is missing", source);
  if (model_type != "llama" && model_type != "mistral" && model_type != "qwen2" && model_type != "qwen3")
    return unimplemented("{}: model_type '{}' is not supported (supported: llama, mistral, qwen2, qwen3)", source, model_type);
  Fields f(j, source);
  ModelConfig c;
  // Mistral's dense models are Llama's architecture (as llama.cpp's converter writes them).
  c.arch = model_type == "mistral" ? "llama" : model_type;
  constexpr int64_t kBig = 1 << 20;
  HZ_ASSIGN_OR_RETURN(c.num_layers, f.i32("num_hidden_layers", std::nullopt, 1, 4096));
  HZ_ASSIGN_OR_RETURN(c.hidden, f.i32("hidden_size", std::nullopt, 1, kBig));
  HZ_ASSIGN_OR_RETURN(c.num_heads, f.i32("num_attention_heads", std::nullopt, 1, 4096));
  HZ_ASSIGN_OR_RETURN(c.num_kv_heads, f.i32("num_key_value_heads", c.num_heads, 1, c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0)
    return data_loss("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source, c.num_heads, c.num_kv_heads);
  HZ_ASSIGN_OR_RETURN(c.head_dim, f.i32("head_dim", c.hidden / c.num_heads, 2, 4096));
  if (c.head_dim % 2 != 0) return data_loss("{}: head_dim {} is odd", source, c.head_dim);
  c.head_dim_v = c.head_dim;
  HZ_ASSIGN_OR_RETURN(c.ffn, f.i32("intermediate_size", std::nullopt, 1, kBig));
  HZ_ASSIGN_OR_RETURN(c.vocab, f.i32("vocab_size", std::nullopt, 1, 1 << 24));
  HZ_ASSIGN_OR_RETURN(c.train_ctx, f.i32("max_position_embeddings", 2048, 1, int64_t{1} << 30));
  HZ_ASSIGN_OR_RETURN(double eps, f.num(j, "rms_norm_eps", 1e-6));
  if (!(eps > 0 && eps < 1)) return data_loss("{}: rms_norm_eps = {} is not in (0, 1)", source, eps);
  c.rms_eps = static_cast<float>(eps);
  HZ_ASSIGN_OR_RETURN(c.tied_embeddings, f.boolean("tie_word_embeddings", false));
  HZ_ASSIGN_OR_RETURN(bool sliding, f.boolean("use_sliding_window", model_type == "mistral"));
  if (sliding) {
    HZ_ASSIGN_OR_RETURN(c.sliding_window, f.i32("sliding_window", 0, 0, int64_t{1} << 30));
  }

  // NOTE: HF checkpoints rotate (i, i + d/2) pairs ("rotate_half"); GGUF's llama converter permutes
  // Q/K rows so that adjacent pairs rotate instead. Running RoPE in the NeoX layout on the HF
  // rows is the same computation, with no copy of the (memory-mapped) weights.
  c.rope.layout = RopeLayout::kNeox;
  c.rope.dim = c.head_dim;
  HZ_ASSIGN_OR_RETURN(double theta, f.num(j, "rope_theta", 10000.0));
  if (!(theta > 1.0)) return data_loss("{}: rope_theta = {} must be > 1", source, theta);
  c.rope.freq_base = static_cast<float>(theta);
  c.rope.orig_ctx = c.train_ctx;
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    HZ_RETURN_IF_ERROR(read_rope_scaling(j["rope_scaling"], f, source, &c));
  }
  return c;
}

GgufMetadata gguf_hparams(const ModelConfig& c) {
  GgufMetadata kv;
  const std::string p = c.arch + ".";
  auto set = [&](const std::string& key, GgufValue v) { kv.emplace_back(key, std::move(v)); };
  auto u32 = [](int64_t v) { return GgufValue::make_u32(static_cast<uint32_t>(v)); };
  set("general.architecture", GgufValue::make_str(c.arch));
  if (!c.name.empty()) set("general.name", GgufValue::make_str(c.name));
  set(p + "context_length", u32(c.train_ctx));
  set(p + "embedding_length", u32(c.hidden));
  set(p + "block_count", u32(c.num_layers));
  set(p + "feed_forward_length", u32(c.ffn));
  set(p + "attention.head_count", u32(c.num_heads));
  set(p + "attention.head_count_kv", u32(c.num_kv_heads));
  if (c.head_dim != c.hidden / c.num_heads) {
    set(p + "attention.key_length", u32(c.head_dim));
    set(p + "attention.value_length", u32(c.head_dim_v));
  }
  set(p + "attention.layer_norm_rms_epsilon", GgufValue::make_f32(c.rms_eps));
  set(p + "rope.dimension_count", u32(c.rope.dim));
  set(p + "rope.freq_base", GgufValue::make_f32(c.rope.freq_base));
  switch (c.rope.scaling) {
    case RopeScaling::kNone: break;
    case RopeScaling::kLinear:
      set(p + "rope.scaling.type", GgufValue::make_str("linear"));
      set(p + "rope.scaling.factor", GgufValue::make_f32(1.0f / c.rope.freq_scale));
      break;
    case RopeScaling::kYarn:
      set(p + "rope.scaling.type", GgufValue::make_str("yarn"));
      set(p + "rope.scaling.factor", GgufValue::make_f32(1.0f / c.rope.freq_scale));
      set(p + "rope.scaling.original_context_length", u32(c.rope.orig_ctx));
      set(p + "rope.scaling.attn_factor", GgufValue::make_f32(c.rope.attn_factor));
      set(p + "rope.scaling.yarn_beta_fast", GgufValue::make_f32(c.rope.beta_fast));
      set(p + "rope.scaling.yarn_beta_slow", GgufValue::make_f32(c.rope.beta_slow));
      break;
    case RopeScaling::kLlama3:
      // llama.cpp keeps Llama 3's frequency factors in a rope_freqs.weight tensor instead;
      // horizon reads these keys.
      set(p + "rope.scaling.type", GgufValue::make_str("llama3"));
      set(p + "rope.scaling.factor", GgufValue::make_f32(1.0f / c.rope.freq_scale));
      set(p + "rope.scaling.original_context_length", u32(c.rope.orig_ctx));
      set(p + "rope.scaling.low_freq_factor", GgufValue::make_f32(c.rope.low_freq_factor));
      set(p + "rope.scaling.high_freq_factor", GgufValue::make_f32(c.rope.high_freq_factor));
      break;
  }
  if (c.sliding_window > 0 && c.arch != "llama") set(p + "attention.sliding_window", u32(c.sliding_window));
  return kv;
}

}  // namespace hz
