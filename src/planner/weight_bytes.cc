#include "planner/weight_bytes.h"

namespace hz {

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

uint64_t weights_bytes(const ModelShape& s, DType t) { return weights_bytes(s, t, t); }

uint64_t weights_bytes(const ModelShape& s, DType t, DType head) {
  uint64_t bytes = 0;
  for (const auto& c : enumerate_weights(s)) {
    const bool is_head = c.name == "token_embd.weight" || c.name == "output.weight";
    DType et = c.quantizable ? effective_weight_type(is_head ? head : t, c.row_len) : DType::kF32;
    bytes += row_bytes(et, c.row_len) * c.rows * c.count;
  }
  return bytes;
}

}  // namespace hz
