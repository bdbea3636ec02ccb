// Rotary position embedding: per-pair angle multipliers computed once from a resolved RopeConfig
// (every scaling scheme folded in), applied in place. Scaling metadata: model/rope_scaling.h.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace hz {

class Rope {
 public:
  explicit Rope(const RopeConfig& cfg, int32_t head_dim);
  // Rotates `num_heads` heads of `head_dim` values at x (heads contiguous) for position `pos`.
  void apply(float* x, int32_t num_heads, int64_t pos) const;
  // The rotation angle of pair `i` at `pos` (tests compare it with hand-computed values).
  float angle(int64_t pos, int32_t i) const;
  // The factor cos and sin are multiplied by (YaRN's attention factor; 1 otherwise).
  float mscale() const { return mscale_; }

 private:
  RopeConfig cfg_;
  int32_t head_dim_;
  // angle(pos, i) = pos * theta_[i]: the base frequency of pair i with linear / NTK / YaRN /
  // Llama 3 scaling folded in.
  std::vector<float> theta_;  // [dim / 2]
  float mscale_ = 1.0f;
};

}  // namespace hz
