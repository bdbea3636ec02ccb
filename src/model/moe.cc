#include "model/moe.h"

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/kernels.h"

namespace hz {

void route_token(const float* logits, int32_t num_experts, int32_t k, bool normalize, int32_t* ids, float* weights,
                 float* probs) {
  HZ_CHECK(k >= 1 && k <= num_experts);
  std::memcpy(probs, logits, sizeof(float) * num_experts);
  kernels::softmax(probs, num_experts);
  // Top-k by repeated selection (k is small): strictly greater wins, so ties keep the lower id.
  for (int32_t r = 0; r < k; ++r) {
    int32_t best = -1;
    for (int32_t e = 0; e < num_experts; ++e) {
      bool taken = false;
      for (int32_t j = 0; j < r; ++j) taken |= ids[j] == e;
      if (taken) continue;
      if (best < 0 || probs[e] > probs[best]) best = e;
    }
    ids[r] = best;
    weights[r] = probs[best];
  }
  if (normalize) {
    float sum = 0;
    for (int32_t r = 0; r < k; ++r) sum += weights[r];
    // The softmax makes every probability positive unless it underflowed; keep the weights as they
    // are then rather than divide by zero.
    if (sum > 0) {
      for (int32_t r = 0; r < k; ++r) weights[r] /= sum;
    }
  }
}

void MoeBlock::forward(const ModelConfig& c, const LayerWeights& L, const float* xn, int64_t num_tokens, float* out,
                       const MatmulFn& matmul) {
  const int32_t ne = c.num_experts;
  const int32_t k = c.num_experts_used;
  const int64_t hidden = c.hidden;
  HZ_CHECK(ne > 0 && k > 0 && L.router.present());
  auto grow = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(logits_, num_tokens * ne);
  grow(probs_, ne);
  ids_.resize(num_tokens * k);
  grow(weights_, num_tokens * k);
  grow(expert_out_, num_tokens * k * hidden);

  // Route every token.
  matmul(L.router, xn, num_tokens, logits_.data());
  slots_.resize(ne);
  for (auto& s : slots_) s.clear();
  for (int64_t t = 0; t < num_tokens; ++t) {
    route_token(&logits_[t * ne], ne, k, c.expert_weights_norm, &ids_[t * k], &weights_[t * k], probs_.data());
    for (int32_t r = 0; r < k; ++r) slots_[ids_[t * k + r]].push_back(t * k + r);
  }

  // One batch per expert: gather its tokens, run the expert's FFN once, scatter to (token, rank).
  for (int32_t e = 0; e < ne; ++e) {
    const std::vector<int64_t>& slots = slots_[e];
    const int64_t n = static_cast<int64_t>(slots.size());
    if (n == 0) continue;
    grow(gathered_, n * hidden);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&gathered_[i * hidden], &xn[(slots[i] / k) * hidden], sizeof(float) * hidden);
    swiglu_ffn(L.gate_exps.expert(e), L.up_exps.expert(e), L.down_exps.expert(e), gathered_.data(), n, gathered_.data(),
               ffn_, matmul);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&expert_out_[slots[i] * hidden], &gathered_[i * hidden], sizeof(float) * hidden);
  }

  // Weighted sum in rank order per token.
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* o = out + t * hidden;
    std::memset(o, 0, sizeof(float) * hidden);
    for (int32_t r = 0; r < k; ++r) kernels::axpy(o, weights_[t * k + r], &expert_out_[(t * k + r) * hidden], hidden);
  }

  // Shared expert, scaled per token by sigmoid(gate . x), added after the routed sum.
  if (L.shared_gate.present()) {
    grow(shared_out_, num_tokens * hidden);
    swiglu_ffn(L.shared_gate, L.shared_up, L.shared_down, xn, num_tokens, shared_out_.data(), ffn_, matmul);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float g = kernels::dot_f32(L.shared_gate_inp.data(), xn + t * hidden, hidden);
      const float gate = 1.0f / (1.0f + std::exp(-g));
      kernels::axpy(out + t * hidden, gate, &shared_out_[t * hidden], hidden);
    }
  }
}

}  // namespace hz
