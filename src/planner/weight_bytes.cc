#include "planner/weight_bytes.h"

namespace hz {

std::vector<WeightClass> enumerate_weights(const ModelShape& s) {
  std::vector<WeightClass> w;
  const uint64_t L = s.num_layers;
  auto matrix = [&](std::string name, uint64_t rows, uint64_t row_len, uint64_t count, bool expert = false) {
    if (rows > 0 && row_len > 0 && count > 0) w.push_back({std::move(name), rows, row_len, count, true, expert});
  };
  auto vec = [&](std::string name, uint64_t len, uint64_t count) {
    if (len > 0 && count > 0) w.push_back({std::move(name), 1, len, count, false, false});
  };
  matrix("token_embd.weight", s.vocab, s.hidden, 1);
  vec("blk.*.attn_norm.weight", s.hidden, L);
  vec("blk.*.ffn_norm.weight", s.hidden, L);
  if (s.is_mla()) {
    const uint64_t qk = s.qk_nope_head_dim + s.qk_rope_head_dim;
    if (s.q_lora_rank > 0) {
      matrix("blk.*.attn_q_a.weight", s.q_lora_rank, s.hidden, L);
      vec("blk.*.attn_q_a_norm.weight", s.q_lora_rank, L);
      matrix("blk.*.attn_q_b.weight", s.num_heads * qk, s.q_lora_rank, L);
    } else {
      matrix("blk.*.attn_q.weight", s.num_heads * qk, s.hidden, L);
    }
    matrix("blk.*.attn_kv_a_mqa.weight", s.kv_lora_rank + s.qk_rope_head_dim, s.hidden, L);
    vec("blk.*.attn_kv_a_norm.weight", s.kv_lora_rank, L);
    matrix("blk.*.attn_kv_b.weight", s.num_heads * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank, L);
    matrix("blk.*.attn_output.weight", s.hidden, s.num_heads * s.v_head_dim, L);
  } else {
    const uint64_t q_dim = s.num_heads * s.head_dim, kv_dim = s.num_kv_heads * s.head_dim;
    matrix("blk.*.attn_q.weight", q_dim, s.hidden, L);
    matrix("blk.*.attn_k.weight", kv_dim, s.hidden, L);
    matrix("blk.*.attn_v.weight", kv_dim, s.hidden, L);
    matrix("blk.*.attn_output.weight", s.hidden, q_dim, L);
    if (s.attention_bias) {
      vec("blk.*.attn_q.bias", q_dim, L);
      vec("blk.*.attn_k.bias", kv_dim, L);
      vec("blk.*.attn_v.bias", kv_dim, L);
    }
    if (s.qk_norm) {
      vec("blk.*.attn_q_norm.weight", s.head_dim, L);
      vec("blk.*.attn_k_norm.weight", s.head_dim, L);
    }
  }
  const uint64_t dense_layers = s.is_moe() ? s.first_k_dense : L;
  const uint64_t moe_layers = L - dense_layers;
  matrix("blk.*.ffn_gate.weight", s.ffn, s.hidden, dense_layers);
  matrix("blk.*.ffn_up.weight", s.ffn, s.hidden, dense_layers);
  matrix("blk.*.ffn_down.weight", s.hidden, s.ffn, dense_layers);
  if (s.is_moe()) {
    // The router stays f32 (llama.cpp's quantizer leaves ffn_gate_inp alone).
    w.push_back({"blk.*.ffn_gate_inp.weight", s.num_experts, s.hidden, moe_layers, false, false});
    matrix("blk.*.ffn_gate_exps.weight", s.moe_ffn, s.hidden, moe_layers * s.num_experts, true);
    matrix("blk.*.ffn_up_exps.weight", s.moe_ffn, s.hidden, moe_layers * s.num_experts, true);
    matrix("blk.*.ffn_down_exps.weight", s.hidden, s.moe_ffn, moe_layers * s.num_experts, true);
    const uint64_t shared = s.num_shared_experts * s.shared_expert_ffn;  // shared experts run as one wide FFN
    matrix("blk.*.ffn_gate_shexp.weight", shared, s.hidden, moe_layers);
    matrix("blk.*.ffn_up_shexp.weight", shared, s.hidden, moe_layers);
    matrix("blk.*.ffn_down_shexp.weight", s.hidden, shared, moe_layers);
    if (s.shared_expert_gate) vec("blk.*.ffn_gate_inp_shexp.weight", s.hidden, moe_layers);
  }
  vec("output_norm.weight", s.hidden, 1);
  if (!s.tied_embeddings) matrix("output.weight", s.vocab, s.hidden, 1);
  return w;
}

ParamCounts count_params(const ModelShape& s) {
  ParamCounts p;
  if (s.file_params) {
    p.total = *s.file_params;
    uint64_t experts = s.file_expert_params.value_or(0);
    p.active = p.total - experts;
    if (s.num_experts > 0) p.active += experts / s.num_experts * s.num_experts_used;
    return p;
  }
  for (const auto& c : enumerate_weights(s)) {
    p.total += c.elements();
    p.active += c.routed_expert ? c.elements() / s.num_experts * s.num_experts_used : c.elements();
  }
  return p;
}

double bits_per_weight(DType t) {
  const auto& tr = traits(t);
  return 8.0 * tr.block_bytes / tr.block_elems;
}

DType effective_weight_type(DType t, uint64_t row_len) {
  const auto& tr = traits(t);
  if (row_len % tr.block_elems == 0) return t;
  if (tr.block_elems == 256 && row_len % 32 == 0) return DType::kQ8_0;
  return DType::kF16;
}

const std::vector<DType>& plannable_weight_types() {
  static const std::vector<DType> kTypes = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                            DType::kQ6_K, DType::kQ5_K, DType::kQ4_K, DType::kQ4_0};
  return kTypes;
}

uint64_t weights_bytes(const ModelShape& s, DType t) {
  uint64_t bytes = 0;
  for (const auto& c : enumerate_weights(s)) {
    DType et = c.quantizable ? effective_weight_type(t, c.row_len) : DType::kF32;
    bytes += row_bytes(et, c.row_len) * c.rows * c.count;
  }
  return bytes;
}

}  // namespace hz
