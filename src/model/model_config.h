// ModelConfig: the hyper-parameters of a decoder-only transformer, read from GGUF metadata
// (`<arch>.*` keys) with SPEC M1's defaults for absent optional keys, and checked for consistency.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace hz {

enum class RopeLayout { kNormal, kNeox };  // normal: pairs (2i, 2i+1); NeoX: pairs (i, i + dim/2)
// kNtk: NTK-aware scaling (the base is stretched, positions are not); kLlama3: Llama 3.1's
// frequency-dependent divisors (computed, or read from a rope_freqs.weight tensor).
enum class RopeScaling { kNone, kLinear, kNtk, kYarn, kLlama3 };

// RoPE parameters after scaling has been resolved (metadata, then flag overrides); the Rope class
// turns them into one angle per (position, pair). See model/rope_scaling.h for where they come from.
struct RopeConfig {
  RopeLayout layout = RopeLayout::kNormal;
  int32_t dim = 0;              // rotated dimensions per head (<= head_dim)
  float freq_base = 10000.0f;   // as stored; NTK scaling stretches it inside Rope
  RopeScaling scaling = RopeScaling::kNone;
  float freq_scale = 1.0f;      // 1 / scaling factor (linear, YaRN, NTK, Llama 3)
  int32_t orig_ctx = 0;         // YaRN / Llama 3: the original training context
  // YaRN: ext_factor 1 mixes interpolation and extrapolation along the beta_fast..beta_slow ramp;
  // attn_factor multiplies cos/sin on top of YaRN's own 0.1 ln(factor) + 1.
  float ext_factor = -1.0f;     // < 0: by type (1 for YaRN, else 0), set by apply_rope_overrides
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  // Llama 3 (when no rope_freqs tensor gives the divisors directly).
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  // Per-pair frequency divisors [dim / 2] (rope_freqs.weight, or computed for Llama 3); empty: all 1.
  std::vector<float> freq_factors;
};

struct RopeOverrides;  // model/model_overrides.h

struct ModelConfig {
  std::string arch;          // general.architecture
  std::string name;          // general.name, or the file name
  int32_t num_layers = 0;
  int32_t hidden = 0;        // embedding length
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;      // key/query head size
  int32_t head_dim_v = 0;    // value head size
  int32_t ffn = 0;           // feed-forward hidden size of a dense layer
  int32_t vocab = 0;
  int32_t train_ctx = 0;     // context length the model was trained with
  float rms_eps = 1e-5f;
  RopeConfig rope;
  // Mixture of experts (see model/moe.h).
  int32_t num_experts = 0;       // 0: dense
  int32_t num_experts_used = 0;  // top-k
  int32_t expert_ffn = 0;        // hidden size of one routed expert
  int32_t shared_expert_ffn = 0; // hidden size of the shared expert; 0: none
  bool expert_weights_norm = true;  // renormalise the top-k router probabilities to sum 1
  int32_t sliding_window = 0;    // 0: full attention
  bool tied_embeddings = false;  // output head shares token_embd.weight

  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  int32_t v_dim() const { return num_kv_heads * head_dim_v; }

  // Reads and validates the hyper-parameters, with the user's RoPE overrides applied on top of the
  // file's; errors name the file and key (or the flag).
  static Result<ModelConfig> from_gguf(const GgufFile& f);
  static Result<ModelConfig> from_gguf(const GgufFile& f, const RopeOverrides& rope_overrides);
  // From a Hugging Face config.json (llama, mistral, qwen2, qwen3), in model/hf_config.cc. HF
  // checkpoints keep Q/K rows in rotate-half order, so RoPE runs in the NeoX layout; `source`
  // names the file in errors.
  static Result<ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& source = "config.json");
};

}  // namespace hz
