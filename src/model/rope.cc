#include "model/rope.h"

#include <cmath>

namespace hz {

Rope::Rope(const RopeConfig& cfg, int32_t head_dim) : cfg_(cfg), head_dim_(head_dim) {
  const int32_t half = cfg.dim / 2;
  inv_freq_.resize(half);
  for (int32_t i = 0; i < half; ++i) {
    inv_freq_[i] = static_cast<float>(std::pow(static_cast<double>(cfg.freq_base), -2.0 * i / cfg.dim));
  }
}

float Rope::angle(int64_t pos, int32_t i) const {
  return static_cast<float>(pos) * cfg_.freq_scale * inv_freq_[i];
}

void Rope::apply(float* x, int32_t num_heads, int64_t pos) const {
  const int32_t half = cfg_.dim / 2;
  // cos/sin once per position, shared by all heads.
  float cs[512], sn[512];
  for (int32_t i = 0; i < half; ++i) {
    float theta = angle(pos, i);
    cs[i] = std::cos(theta) * mscale_;
    sn[i] = std::sin(theta) * mscale_;
  }
  for (int32_t h = 0; h < num_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim_;
    if (cfg_.layout == RopeLayout::kNormal) {
      for (int32_t i = 0; i < half; ++i) {
        float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cs[i] - b * sn[i];
        v[2 * i + 1] = a * sn[i] + b * cs[i];
      }
    } else {
      for (int32_t i = 0; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * cs[i] - b * sn[i];
        v[i + half] = a * sn[i] + b * cs[i];
      }
    }
  }
}

}  // namespace hz
