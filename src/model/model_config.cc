#include "model/model_config.h"

#include <algorithm>

#include "model/arch.h"
#include "model/model_overrides.h"
#include "model/model_shape.h"
#include "model/rope_scaling.h"

namespace hz {
namespace {

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

Result<ModelConfig> ModelConfig::from_gguf(const GgufFile& f) { return from_gguf(f, RopeOverrides{}); }

Result<ModelConfig> ModelConfig::from_gguf(const GgufFile& f, const RopeOverrides& rope_overrides) {
  ModelConfig c;
  HZ_ASSIGN_OR_RETURN(c.arch, f.require_string("general.architecture"));
  const ArchSpec* arch = find_arch(c.arch);
  if (arch == nullptr)
    return unimplemented("{}: architecture '{}' is not supported (supported: {})", f.path(), c.arch, supported_arch_names());
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

  HZ_ASSIGN_OR_RETURN(c.rope, read_rope_config(f, p, c.head_dim, c.train_ctx, arch->rope_layout));
  HZ_RETURN_IF_ERROR(apply_rope_overrides(rope_overrides, &c.rope));

  // Mixture of experts.
  HZ_ASSIGN_OR_RETURN(c.num_experts, get_i32(f, p + "expert_count", 0, 0, 4096));
  HZ_ASSIGN_OR_RETURN(c.num_experts_used, get_i32(f, p + "expert_used_count", 0, 0, c.num_experts));
  if (c.num_experts > 0 && c.num_experts_used == 0)
    return data_loss("{}: {}expert_count is {} but expert_used_count is missing or 0", f.path(), p, c.num_experts);
  if (arch->requires_experts && c.num_experts == 0)
    return data_loss("{}: architecture '{}' needs {}expert_count > 0", f.path(), c.arch, p);
  if (c.num_experts > 0) {
    c.expert_weights_norm = arch->expert_weights_norm;
    c.expert_ffn = c.ffn;
    if (arch->expert_ffn_key) {
      const int64_t def = static_cast<int64_t>(default_expert_ffn(c.arch, c.ffn, c.num_experts_used));
      HZ_ASSIGN_OR_RETURN(c.expert_ffn, get_i32(f, p + "expert_feed_forward_length", def, 1, kBig));
    }
    if (arch->shared_expert) {
      const int64_t def = static_cast<int64_t>(default_shared_expert_ffn(c.ffn));
      HZ_ASSIGN_OR_RETURN(c.shared_expert_ffn, get_i32(f, p + "expert_shared_feed_forward_length", def, 1, kBig));
    }
  }
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
