#include "model/model_config.h"

#include <set>

namespace hz {
namespace {

// Architectures whose forward pass this build implements.
const std::set<std::string>& supported_archs() {
  static const std::set<std::string> kArchs = {"llama", "mistral", "qwen2", "qwen3"};
  return kArchs;
}

Result<int32_t> get_i32(const GgufFile& f, const std::string& key, std::optional<int64_t> def, int64_t lo, int64_t hi) {
  int64_t v;
  if (!f.has(key)) {
    if (!def) return not_found("{}: required metadata key '{}' is missing", f.path(), key);
    v = *def;
  } else {
    HZ_ASSIGN_OR_RETURN(v, f.get_int_or(key, 0));
  }
  if (v < lo || v > hi) return data_loss("{}: metadata '{}' = {} is outside [{}, {}]", f.path(), key, v, lo, hi);
  return static_cast<int32_t>(v);
}

}  // namespace

Result<ModelConfig> ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  HZ_ASSIGN_OR_RETURN(c.arch, f.require_string("general.architecture"));
  if (supported_archs().count(c.arch) == 0)
    return unimplemented("{}: architecture '{}' is not supported (supported: llama, mistral, qwen2, qwen3)", f.path(), c.arch);
  HZ_ASSIGN_OR_RETURN(c.name, f.get_string_or("general.name", ""));
  const std::string p = c.arch + ".";
  constexpr int64_t kBig = 1 << 20;
  HZ_ASSIGN_OR_RETURN(c.num_layers, get_i32(f, p + "block_count", std::nullopt, 1, 4096));
  HZ_ASSIGN_OR_RETURN(c.hidden, get_i32(f, p + "embedding_length", std::nullopt, 1, kBig));
  HZ_ASSIGN_OR_RETURN(c.num_heads, get_i32(f, p + "attention.head_count", std::nullopt, 1, 4096));
  HZ_ASSIGN_OR_RETURN(c.num_kv_heads, get_i32(f, p + "attention.head_count_kv", c.num_heads, 1, c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0)
    return data_loss("{}: {}attention.head_count {} is not a multiple of head_count_kv {}", f.path(), p, c.num_heads, c.num_kv_heads);
  int64_t default_head_dim = c.hidden / c.num_heads;
  HZ_ASSIGN_OR_RETURN(c.head_dim, get_i32(f, p + "attention.key_length", default_head_dim, 1, 4096));
  HZ_ASSIGN_OR_RETURN(c.head_dim_v, get_i32(f, p + "attention.value_length", c.head_dim, 1, 4096));
  if (c.head_dim != c.head_dim_v)
    return unimplemented("{}: key_length {} != value_length {} is not supported", f.path(), c.head_dim, c.head_dim_v);
  HZ_ASSIGN_OR_RETURN(c.ffn, get_i32(f, p + "feed_forward_length", std::nullopt, 1, kBig));
  HZ_ASSIGN_OR_RETURN(c.train_ctx, get_i32(f, p + "context_length", 2048, 1, int64_t{1} << 30));
  HZ_ASSIGN_OR_RETURN(double eps, f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(eps > 0 && eps < 1)) return data_loss("{}: {}attention.layer_norm_rms_epsilon = {} is not in (0, 1)", f.path(), p, eps);
  c.rms_eps = static_cast<float>(eps);

  // RoPE. qwen2/qwen3 use the NeoX layout.
  c.rope.layout = (c.arch == "qwen2" || c.arch == "qwen3") ? RopeLayout::kNeox : RopeLayout::kNormal;
  HZ_ASSIGN_OR_RETURN(c.rope.dim, get_i32(f, p + "rope.dimension_count", c.head_dim, 2, c.head_dim));
  if (c.rope.dim % 2 != 0) return data_loss("{}: {}rope.dimension_count {} is odd", f.path(), p, c.rope.dim);
  HZ_ASSIGN_OR_RETURN(double base, f.get_float_or(p + "rope.freq_base", 10000.0));
  if (!(base > 1.0)) return data_loss("{}: {}rope.freq_base = {} must be > 1", f.path(), p, base);
  c.rope.freq_base = static_cast<float>(base);
  HZ_ASSIGN_OR_RETURN(std::string scaling, f.get_string_or(p + "rope.scaling.type", "none"));
  HZ_ASSIGN_OR_RETURN(double factor, f.get_float_or(p + "rope.scaling.factor", 0.0));
  if (factor == 0.0) {
    HZ_ASSIGN_OR_RETURN(factor, f.get_float_or(p + "rope.scale_linear", 0.0));
  }
  if (scaling == "none" && factor > 0 && factor != 1.0) scaling = "linear";
  if (scaling == "linear") {
    if (!(factor > 0)) return data_loss("{}: linear RoPE scaling needs {}rope.scaling.factor > 0", f.path(), p);
    c.rope.scaling = RopeScaling::kLinear;
    c.rope.freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling == "yarn") {
    c.rope.scaling = RopeScaling::kYarn;
    if (factor > 0) c.rope.freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    return unimplemented("{}: RoPE scaling type '{}' is not supported", f.path(), scaling);
  }
  HZ_ASSIGN_OR_RETURN(c.rope.orig_ctx, get_i32(f, p + "rope.scaling.original_context_length", c.train_ctx, 1, int64_t{1} << 30));

  HZ_ASSIGN_OR_RETURN(c.num_experts, get_i32(f, p + "expert_count", 0, 0, 4096));
  HZ_ASSIGN_OR_RETURN(c.num_experts_used, get_i32(f, p + "expert_used_count", 0, 0, c.num_experts));
  if (c.num_experts > 0 && c.num_experts_used == 0)
    return data_loss("{}: {}expert_count is {} but expert_used_count is missing or 0", f.path(), p, c.num_experts);
  HZ_ASSIGN_OR_RETURN(c.sliding_window, get_i32(f, p + "attention.sliding_window", 0, 0, int64_t{1} << 30));

  // Vocabulary size comes from the embedding table; the tokenizer must agree.
  HZ_ASSIGN_OR_RETURN(const GgufTensorInfo* emb, f.require_tensor("token_embd.weight"));
  if (emb->dims.size() != 2 || emb->dims[0] != static_cast<uint64_t>(c.hidden))
    return data_loss("{}: token_embd.weight has shape {}, expected [{}, vocab]", f.path(), emb->shape_string(), c.hidden);
  if (emb->dims[1] > (1u << 24)) return data_loss("{}: token_embd.weight vocabulary {} is too large", f.path(), emb->dims[1]);
  c.vocab = static_cast<int32_t>(emb->dims[1]);
  c.tied_embeddings = f.get_tensor("output.weight") == nullptr;
  return c;
}

}  // namespace hz
