#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace hz {
namespace {

// YaRN: the pair index at which a dimension completes `num_rotations` turns over the original
// context (the published correction range, floor/ceil'd and clamped as llama.cpp does).
double yarn_corr_dim(int32_t dim, int32_t orig_ctx, double num_rotations, double base) {
  return dim * std::log(orig_ctx / (num_rotations * 2 * M_PI)) / (2 * std::log(base));
}

}  // namespace

Rope::Rope(const RopeConfig& cfg, int32_t head_dim) : cfg_(cfg), head_dim_(head_dim) {
  HZ_CHECK(cfg.dim >= 2 && cfg.dim <= head_dim && cfg.dim % 2 == 0);
  const int32_t half = cfg.dim / 2;
  double base = cfg.freq_base;
  double scale = cfg.freq_scale;  // multiplies positions (linear, YaRN's interpolated part)
  if (cfg.scaling == RopeScaling::kNtk) {
    // NTK-aware: stretch the base so the lowest frequency is interpolated by the factor while the
    // highest is untouched: base' = base * factor^(dim / (dim - 2)).
    if (cfg.dim > 2) base *= std::pow(1.0 / cfg.freq_scale, static_cast<double>(cfg.dim) / (cfg.dim - 2));
    scale = 1.0;
  }
  double corr_low = 0, corr_high = 0;
  // ext_factor < 0 means "by type" (an unresolved config): 1 for YaRN.
  const double ext_factor = cfg.ext_factor < 0 ? 1.0 : cfg.ext_factor;
  const bool yarn = cfg.scaling == RopeScaling::kYarn && ext_factor != 0.0;
  if (yarn) {
    corr_low = std::max(0.0, std::floor(yarn_corr_dim(cfg.dim, cfg.orig_ctx, cfg.beta_fast, base)));
    corr_high = std::min(cfg.dim - 1.0, std::ceil(yarn_corr_dim(cfg.dim, cfg.orig_ctx, cfg.beta_slow, base)));
  }
  theta_.resize(half);
  for (int32_t i = 0; i < half; ++i) {
    double extrap = std::pow(base, -2.0 * i / cfg.dim);
    if (!cfg.freq_factors.empty()) extrap /= cfg.freq_factors[i];
    double t = extrap * scale;
    if (yarn) {
      // Pairs that turn fast (i < corr_low) keep their trained frequency (extrapolation), slow ones
      // (i > corr_high) are interpolated, a linear ramp in between.
      double ramp = 1 - std::clamp((i - corr_low) / std::max(0.001, corr_high - corr_low), 0.0, 1.0);
      double mix = ramp * ext_factor;
      t = extrap * scale * (1 - mix) + extrap * mix;
    }
    theta_[i] = static_cast<float>(t);
  }
  mscale_ = cfg.attn_factor;
  if (yarn) mscale_ *= static_cast<float>(1.0 + 0.1 * std::log(1.0 / cfg.freq_scale));
}

float Rope::angle(int64_t pos, int32_t i) const { return static_cast<float>(pos) * theta_[i]; }

void Rope::apply(float* x, int32_t num_heads, int64_t pos) const {
  const int32_t half = cfg_.dim / 2;
  // cos/sin once per position, shared by all heads. head_dim <= 4096 (checked by the config).
  float cs[2048], sn[2048];
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
