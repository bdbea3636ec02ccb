// Rotary position embedding: per-dimension inverse frequencies computed once, applied in place.
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

 private:
  RopeConfig cfg_;
  int32_t head_dim_;
  std::vector<float> inv_freq_;  // [dim / 2]
  float mscale_ = 1.0f;          // YaRN magnitude scaling of cos/sin
};

}  // namespace hz
