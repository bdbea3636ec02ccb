// ModelConfig: the hyper-parameters of a decoder-only transformer, read from GGUF metadata
// (`<arch>.*` keys) with SPEC M1's defaults for absent optional keys, and checked for consistency.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

#include "base/status.h"
#include "format/gguf.h"

namespace hz {

enum class RopeLayout { kNormal, kNeox };  // normal: pairs (2i, 2i+1); NeoX: pairs (i, i + dim/2)
enum class RopeScaling { kNone, kLinear, kYarn, kLlama3 };

struct RopeConfig {
  RopeLayout layout = RopeLayout::kNormal;
  int32_t dim = 0;              // rotated dimensions per head (<= head_dim)
  float freq_base = 10000.0f;
  RopeScaling scaling = RopeScaling::kNone;
  float freq_scale = 1.0f;      // positions are multiplied by this (1 / linear factor)
  int32_t orig_ctx = 0;         // YaRN / Llama 3: the original training context
  // YaRN / Llama 3 parameters (used by the architectures issue).
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
};

struct ModelConfig {
  std::string arch;          // general.architecture
  std::string name;          // general.name, or the file name
  int32_t num_layers = 0;
  int32_t hidden = 0;        // embedding length
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;      // key/query head size
  int32_t head_dim_v = 0;    // value head size
  int32_t ffn = 0;           // feed-forward hidden size (per expert for MoE)
  int32_t vocab = 0;
  int32_t train_ctx = 0;     // context length the model was trained with
  float rms_eps = 1e-5f;
  RopeConfig rope;
  int32_t num_experts = 0;       // 0: dense
  int32_t num_experts_used = 0;
  int32_t sliding_window = 0;    // 0: full attention
  bool tied_embeddings = false;  // output head shares token_embd.weight

  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  int32_t v_dim() const { return num_kv_heads * head_dim_v; }

  // Reads and validates the hyper-parameters; errors name the file and key.
  static Result<ModelConfig> from_gguf(const GgufFile& f);
  // From a Hugging Face config.json (llama, mistral, qwen2, qwen3), in model/hf_config.cc. HF
  // checkpoints keep Q/K rows in rotate-half order, so RoPE runs in the NeoX layout; `source`
  // names the file in errors.
  static Result<ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& source = "config.json");
};

}  // namespace hz
