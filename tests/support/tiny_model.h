// Tiny random models for architecture tests: a spec -> F32 weights (seeded) -> a GGUF written with
// GgufWriter, and a plain-loop reference forward pass (double precision, no engine code) to compare
// the engine with. Covers llama (dense or Mixtral-style MoE), qwen2 (biases), qwen3 (q/k norm),
// qwen2moe (shared expert, no top-k renormalisation) and qwen3moe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace hz::test {

struct TinyModelSpec {
  std::string arch = "llama";
  int32_t layers = 2;
  int32_t hidden = 32;
  int32_t heads = 4;
  int32_t kv_heads = 2;
  int32_t head_dim = 8;
  int32_t ffn = 48;            // dense FFN (and Mixtral expert) width
  int32_t vocab = 64;
  int32_t experts = 0;         // 0: dense
  int32_t experts_used = 0;
  int32_t expert_ffn = 0;      // qwen*moe: expert_feed_forward_length
  int32_t shared_ffn = 0;      // qwen2moe: expert_shared_feed_forward_length
  bool qkv_bias = false;
  bool qk_norm = false;
  float rope_base = 10000.0f;
  float router_scale = 3.0f;   // larger: sharper, more varied routing
  uint32_t seed = 1;
};

struct TinyModel {
  TinyModelSpec spec;
  // Tensor name -> values, row-major as the engine sees them ([rows][cols], experts [e][rows][cols]).
  std::map<std::string, std::vector<float>> w;
  // Written GGUF dims per tensor.
  std::map<std::string, std::vector<uint64_t>> dims;

  static TinyModel random(const TinyModelSpec& spec);
  // Writes the GGUF (after `extra` adds or changes metadata and tensors); returns false on failure.
  bool write(const std::string& path, const std::function<void(GgufWriter&)>& extra = nullptr) const;

  struct Trace {
    // [layer][token] expert ids chosen by the reference router (MoE only), rank order.
    std::vector<std::vector<std::vector<int32_t>>> experts;
    // Smallest gap between the k-th and (k+1)-th router probability seen (routing robustness).
    double min_route_margin = 1e9;
  };
  // Reference logits for every position of `tokens` ([n][vocab]). `skip_qk_norm` leaves out the
  // qwen3 per-head norm (to show a test depends on it).
  std::vector<float> reference_logits(const std::vector<int32_t>& tokens, Trace* trace = nullptr,
                                      bool skip_qk_norm = false) const;
};

}  // namespace hz::test
