// MoeBlock: the mixture-of-experts FFN shared by every MoE architecture (Mixtral-style llama,
// qwen2moe, qwen3moe): softmax router -> top-k -> optional renormalisation, routed SwiGLU experts
// run as one batch per expert, plus an optional sigmoid-gated shared expert (Qwen-MoE).
//
// Determinism: each expert's batch holds exactly the tokens routed to it, and every matmul output
// element is independent of the batch (kernels::matmul's contract). A token's expert outputs are
// then summed in the token's own top-k rank order, so its result does not depend on which other
// tokens share the step (batch- and chunk-invariance).
#pragma once

#include <cstdint>
#include <vector>

#include "model/ffn.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace hz {

// The router's decision for one token: `k` expert ids by descending probability (ties go to the
// lower id) and their weights, softmax probabilities over all `num_experts` logits, divided by
// their sum when `normalize`. `probs` is scratch of num_experts floats.
void route_token(const float* logits, int32_t num_experts, int32_t k, bool normalize, int32_t* ids, float* weights,
                 float* probs);

// Not thread-safe: one per Model, scratch reused across layers and steps.
class MoeBlock {
 public:
  // out[num_tokens][hidden] = MoE FFN of xn[num_tokens][hidden] (the ffn_norm'ed hidden states).
  // `out` must not alias `xn`.
  void forward(const ModelConfig& c, const LayerWeights& L, const float* xn, int64_t num_tokens, float* out,
               const MatmulFn& matmul);
  // Expert ids chosen for the last forward call, [num_tokens][num_experts_used] (tests, stats).
  const std::vector<int32_t>& last_expert_ids() const { return ids_; }

 private:
  std::vector<float> logits_;               // [num_tokens][num_experts]
  std::vector<float> probs_;                // [num_experts]
  std::vector<int32_t> ids_;                // [num_tokens][k]
  std::vector<float> weights_;              // [num_tokens][k]
  std::vector<std::vector<int64_t>> slots_; // per expert: token * k + rank routed there, token order
  std::vector<float> gathered_;             // [routed tokens][hidden], one expert's batch
  std::vector<float> expert_out_;           // [num_tokens][k][hidden]
  std::vector<float> shared_out_;           // [num_tokens][hidden]
  FfnScratch ffn_;
};

}  // namespace hz
