// ModelShape: a model's sizes (layers, widths, heads, experts, MLA ranks) for any architecture,
// read from GGUF metadata, a Hugging Face config.json, or an HF folder, and the tensors a model of
// that shape has. No weights are loaded. The one source of model shape: the planner sizes what
// this reads, and keys a file omits take the defaults ModelConfig (what the engine runs) uses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "format/gguf.h"
#include "kv/kv_layout.h"

namespace hz {

struct RopeScalingInfo {
  std::string type;                 // "" (none), "linear", "yarn", "llama3", "dynamic", ...
  double factor = 1.0;
  uint64_t original_max_positions = 0;
};

struct ModelShape {
  std::string architecture;         // "llama", "qwen2", "mixtral", "deepseek_v3", ...
  std::string source;               // the file or folder it was read from
  uint64_t num_layers = 0;
  uint64_t hidden = 0;
  uint64_t num_heads = 0;
  uint64_t num_kv_heads = 0;
  uint64_t head_dim = 0;            // per query/key head (GQA); for MLA see below
  uint64_t ffn = 0;                 // dense FFN width (the dense layers of a MoE model)
  uint64_t vocab = 0;
  // Mixture of experts (num_experts 0: dense).
  uint64_t num_experts = 0;
  uint64_t num_experts_used = 0;
  uint64_t moe_ffn = 0;             // per routed expert
  uint64_t num_shared_experts = 0;
  uint64_t shared_expert_ffn = 0;   // per shared expert
  bool shared_expert_gate = false;  // Qwen-MoE: a sigmoid gate (hidden x 1) on the shared expert
  uint64_t first_k_dense = 0;       // the first k layers are dense (DeepSeek)
  bool tied_embeddings = false;
  bool attention_bias = false;      // q/k/v biases (Qwen2)
  bool qk_norm = false;             // per-head q/k RMSNorm (Qwen3)
  // Multi-head latent attention (DeepSeek-V2/V3, Kimi K2); kv_lora_rank 0: not MLA.
  uint64_t q_lora_rank = 0;         // 0: a plain q projection
  uint64_t kv_lora_rank = 0;
  uint64_t qk_rope_head_dim = 0;
  uint64_t qk_nope_head_dim = 0;
  uint64_t v_head_dim = 0;
  uint64_t max_positions = 0;       // trained (or extended) context length
  RopeScalingInfo rope_scaling;
  std::string checkpoint_dtype;     // config.json's torch_dtype: "bfloat16", "float16", "float32" or ""
  std::string prequantized;         // config.json's quantization_config.quant_method ("gptq", "fp8"...) or ""
  // With `prequantized`: how the engine loads it (HfQuantConfig::describe()), or why it cannot.
  std::string prequantized_detail;
  bool prequantized_loadable = false;
  // Present when read from a GGUF: the file's real tensor figures.
  std::optional<uint64_t> file_weight_bytes;
  std::optional<uint64_t> file_params;
  std::optional<uint64_t> file_expert_params;  // elements of the routed-expert tensors
  std::string file_weight_type;                // most common matrix type in the file, e.g. "q4_0"

  bool is_mla() const { return kv_lora_rank > 0; }
  bool is_moe() const { return num_experts > 0; }
  KvGeometry kv_geometry() const;
  // Checks the sizes are present and consistent; errors name the field.
  Status validate() const;
};

// One class of identical tensors, e.g. every layer's attn_q, or all routed experts' ffn_up.
struct WeightClass {
  std::string name;        // GGUF tensor name pattern, e.g. "blk.*.attn_q.weight"
  uint64_t rows = 0;       // output features (1 for a vector)
  uint64_t row_len = 0;    // input features: the contiguous, quantized dimension
  uint64_t count = 0;      // how many such tensors (layers, or layers x experts)
  bool quantizable = true; // matrices are; norms, biases and routers stay f32
  bool routed_expert = false;

  uint64_t elements() const { return rows * row_len * count; }
};

// The tensors of a model of this shape (embedding, per-layer attention/FFN/MoE/MLA, head).
std::vector<WeightClass> enumerate_weights(const ModelShape& s);

// Defaults for keys a GGUF omits, shared with ModelConfig::from_gguf (one set of defaults).
// Width of one routed expert: architectures that read `<arch>.expert_feed_forward_length` default
// to the dense width split over the experts used per token (as llama.cpp does); the others
// (llama-arch MoE files such as Mixtral) use the dense width itself and ignore that key.
bool arch_reads_expert_ffn_key(const std::string& arch);
uint64_t default_expert_ffn(const std::string& arch, uint64_t ffn, uint64_t experts_used);
// Width of a Qwen-MoE shared expert without `<arch>.expert_shared_feed_forward_length`.
inline uint64_t default_shared_expert_ffn(uint64_t ffn) { return ffn; }
// Whether the architecture has one gated shared expert per MoE layer (Qwen-MoE).
bool arch_has_shared_expert(const std::string& arch);

// From a parsed GGUF: `<arch>.block_count`, `<arch>.embedding_length`, `<arch>.attention.*`,
// `<arch>.feed_forward_length`, `<arch>.expert_*`, ...; weight figures from the tensor table.
Result<ModelShape> model_shape_from_gguf(const GgufFile& f);
// From a Hugging Face config.json (already parsed); `source` names it in errors.
Result<ModelShape> model_shape_from_hf_config(const nlohmann::json& config, const std::string& source);
// PATH: a .gguf file, a config.json, or a folder holding config.json (or a single .gguf).
Result<ModelShape> load_model_shape(const std::string& path);

}  // namespace hz
