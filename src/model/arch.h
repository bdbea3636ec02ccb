// ArchSpec: what distinguishes each supported `general.architecture` for the shared forward pass
// (attention, FFN and MoE blocks are common code; an architecture is a set of switches on them).
#pragma once

#include <string>
#include <string_view>

#include "model/model_config.h"

namespace hz {

struct ArchSpec {
  const char* name;
  RopeLayout rope_layout;
  // MoE: every layer routes (qwen2moe/qwen3moe); llama/mistral route only when expert_count > 0.
  bool requires_experts;
  // Router: renormalise the top-k softmax probabilities to sum 1 (Mixtral, Qwen3-MoE) or use
  // them as they are (Qwen1.5/2-MoE, norm_topk_prob = false).
  bool expert_weights_norm;
  // Qwen-MoE shared expert: ffn_{gate,up,down}_shexp gated per token by sigmoid(ffn_gate_inp_shexp . x).
  bool shared_expert;
  // Expert FFN width from `<arch>.expert_feed_forward_length` (else feed_forward_length / top-k,
  // as llama.cpp does); llama-arch MoE files (Mixtral) use feed_forward_length itself.
  bool expert_ffn_key;
};

// The spec of `name`, or null when this build does not implement it.
const ArchSpec* find_arch(std::string_view name);
// "llama, mistral, ..." for error messages.
std::string supported_arch_names();

}  // namespace hz
