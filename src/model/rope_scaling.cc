#include "model/rope_scaling.h"

#include <cmath>

#include "kernels/kernels.h"

namespace hz {

Result<RopeScaling> parse_rope_scaling(std::string_view name, std::string_view what) {
  if (name == "none") return RopeScaling::kNone;
  if (name == "linear") return RopeScaling::kLinear;
  if (name == "ntk") return RopeScaling::kNtk;
  if (name == "yarn") return RopeScaling::kYarn;
  if (name == "llama3") return RopeScaling::kLlama3;
  return unimplemented("{}: RoPE scaling type '{}' is not supported (none, linear, ntk, yarn, llama3)", what, name);
}

const char* rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::kNone: return "none";
    case RopeScaling::kLinear: return "linear";
    case RopeScaling::kNtk: return "ntk";
    case RopeScaling::kYarn: return "yarn";
    case RopeScaling::kLlama3: return "llama3";
  }
  return "?";
}

namespace {

Result<float> positive_float(const GgufFile& f, const std::string& key, double def) {
  HZ_ASSIGN_OR_RETURN(double v, f.get_float_or(key, def));
  if (!(v > 0) || !std::isfinite(v)) return data_loss("{}: metadata '{}' = {} must be a positive number", f.path(), key, v);
  return static_cast<float>(v);
}

}  // namespace

Result<RopeConfig> read_rope_config(const GgufFile& f, const std::string& p, int32_t head_dim, int32_t train_ctx,
                                    RopeLayout layout) {
  RopeConfig c;
  c.layout = layout;
  HZ_ASSIGN_OR_RETURN(int64_t dim, f.get_int_or(p + "rope.dimension_count", head_dim));
  if (dim < 2 || dim > head_dim || dim % 2 != 0)
    return data_loss("{}: metadata '{}rope.dimension_count' = {} must be even and in [2, head_dim {}]", f.path(), p, dim,
                     head_dim);
  c.dim = static_cast<int32_t>(dim);
  HZ_ASSIGN_OR_RETURN(double base, f.get_float_or(p + "rope.freq_base", 10000.0));
  if (!(base > 1.0) || !std::isfinite(base)) return data_loss("{}: {}rope.freq_base = {} must be > 1", f.path(), p, base);
  c.freq_base = static_cast<float>(base);

  HZ_ASSIGN_OR_RETURN(std::string type, f.get_string_or(p + "rope.scaling.type", "none"));
  HZ_ASSIGN_OR_RETURN(c.scaling, parse_rope_scaling(type, f.path() + ": metadata '" + p + "rope.scaling.type'"));
  HZ_ASSIGN_OR_RETURN(double factor, f.get_float_or(p + "rope.scaling.factor", 0.0));
  if (factor == 0.0) {
    HZ_ASSIGN_OR_RETURN(factor, f.get_float_or(p + "rope.scale_linear", 0.0));  // older files
  }
  if (factor < 0 || !std::isfinite(factor))
    return data_loss("{}: {}rope.scaling.factor = {} must be positive", f.path(), p, factor);
  // A factor without a type is linear scaling (llama.cpp's reading of old files).
  if (c.scaling == RopeScaling::kNone && factor > 0 && factor != 1.0) c.scaling = RopeScaling::kLinear;
  if (c.scaling != RopeScaling::kNone && factor > 0) c.freq_scale = static_cast<float>(1.0 / factor);

  // Original context: YaRN's ramp and Llama 3's wavelengths are measured against it. Llama 3's
  // default is its 8192-token pre-training context, not the extended context_length.
  const bool has_orig = f.has(p + "rope.scaling.original_context_length");
  HZ_ASSIGN_OR_RETURN(int64_t orig, f.get_int_or(p + "rope.scaling.original_context_length", train_ctx));
  if (orig < 1 || orig > (int64_t{1} << 30))
    return data_loss("{}: {}rope.scaling.original_context_length = {} is out of range", f.path(), p, orig);
  c.orig_ctx = static_cast<int32_t>(orig);
  if (c.scaling == RopeScaling::kLlama3 && !has_orig) c.orig_ctx = 8192;

  HZ_ASSIGN_OR_RETURN(c.ext_factor, f.get_float_or(p + "rope.scaling.yarn_ext_factor", -1.0));  // -1: by type
  HZ_ASSIGN_OR_RETURN(float yarn_attn, positive_float(f, p + "rope.scaling.yarn_attn_factor", 1.0));
  HZ_ASSIGN_OR_RETURN(float attn, positive_float(f, p + "rope.scaling.attn_factor", 1.0));
  c.attn_factor = yarn_attn * attn;
  HZ_ASSIGN_OR_RETURN(c.beta_fast, positive_float(f, p + "rope.scaling.yarn_beta_fast", 32.0));
  HZ_ASSIGN_OR_RETURN(c.beta_slow, positive_float(f, p + "rope.scaling.yarn_beta_slow", 1.0));
  HZ_ASSIGN_OR_RETURN(c.low_freq_factor, positive_float(f, p + "rope.scaling.low_freq_factor", 1.0));
  HZ_ASSIGN_OR_RETURN(c.high_freq_factor, positive_float(f, p + "rope.scaling.high_freq_factor", 4.0));

  // Llama 3.1 files carry the divisors as a tensor (llama.cpp's converter computes them).
  if (const GgufTensorInfo* t = f.get_tensor("rope_freqs.weight")) {
    if (t->dims.size() != 1 || t->dims[0] != static_cast<uint64_t>(c.dim / 2))
      return data_loss("{}: tensor 'rope_freqs.weight' has shape {}, expected [{}] (rope dimensions / 2)", f.path(),
                       t->shape_string(), c.dim / 2);
    if (t->dtype != DType::kF32 && t->dtype != DType::kF16)
      return unimplemented("{}: tensor 'rope_freqs.weight' has type {}, expected f32 or f16", f.path(), dtype_name(t->dtype));
    c.freq_factors.resize(c.dim / 2);
    kernels::dequantize_row(t->dtype, t->data, c.freq_factors.data(), c.dim / 2);
    for (float v : c.freq_factors) {
      if (!(v > 0) || !std::isfinite(v))
        return data_loss("{}: tensor 'rope_freqs.weight' holds {}, every divisor must be positive", f.path(), v);
    }
    if (c.scaling == RopeScaling::kNone) c.scaling = RopeScaling::kLlama3;
  }
  return c;
}

std::vector<float> llama3_freq_factors(int32_t dim, float freq_base, float factor, float low_freq_factor,
                                       float high_freq_factor, int32_t orig_ctx) {
  const double low_wavelen = orig_ctx / static_cast<double>(low_freq_factor);
  const double high_wavelen = orig_ctx / static_cast<double>(high_freq_factor);
  std::vector<float> out(dim / 2);
  for (int32_t i = 0; i < dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(freq_base), -2.0 * i / dim);
    const double wavelen = 2 * M_PI / freq;
    double div;
    if (wavelen < high_wavelen) {
      div = 1;
    } else if (wavelen > low_wavelen) {
      div = factor;
    } else {
      const double smooth = (orig_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      div = 1 / ((1 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(div);
  }
  return out;
}

Status apply_rope_overrides(const RopeOverrides& o, RopeConfig* c) {
  if (o.freq_base) {
    if (!(*o.freq_base > 1.0f) || !std::isfinite(*o.freq_base))
      return invalid_argument("--rope-freq-base {} must be > 1", *o.freq_base);
    c->freq_base = *o.freq_base;
  }
  if (o.freq_scale) {
    if (!(*o.freq_scale > 0.0f) || !std::isfinite(*o.freq_scale))
      return invalid_argument("--rope-freq-scale {} must be > 0", *o.freq_scale);
    c->freq_scale = *o.freq_scale;
  }
  if (o.orig_ctx) {
    if (*o.orig_ctx < 1) return invalid_argument("--yarn-orig-ctx {} must be > 0", *o.orig_ctx);
    c->orig_ctx = *o.orig_ctx;
  }
  if (o.scaling) {
    if (*o.scaling != c->scaling) c->freq_factors.clear();  // divisors belong to the file's own scheme
    c->scaling = *o.scaling;
    if (c->scaling == RopeScaling::kLlama3 && !o.orig_ctx && c->orig_ctx == 0) c->orig_ctx = 8192;
  }

  switch (c->scaling) {
    case RopeScaling::kNone:
      // "none" means none: positions and frequencies as trained, no divisors.
      c->freq_scale = 1.0f;
      c->freq_factors.clear();
      break;
    case RopeScaling::kLinear:
    case RopeScaling::kNtk:
      break;
    case RopeScaling::kYarn:
      if (c->orig_ctx <= 0) return invalid_argument("YaRN RoPE scaling needs the original context (--yarn-orig-ctx)");
      break;
    case RopeScaling::kLlama3:
      if (c->freq_factors.empty()) {
        if (c->freq_scale >= 1.0f)
          return invalid_argument(
              "llama3 RoPE scaling needs a factor > 1: give --rope-freq-scale (1 / factor) or rope.scaling.factor");
        if (!(c->high_freq_factor > c->low_freq_factor))
          return invalid_argument("llama3 RoPE scaling needs high_freq_factor {} > low_freq_factor {}", c->high_freq_factor,
                                  c->low_freq_factor);
        c->freq_factors = llama3_freq_factors(c->dim, c->freq_base, 1.0f / c->freq_scale, c->low_freq_factor,
                                              c->high_freq_factor, c->orig_ctx);
      }
      c->freq_scale = 1.0f;  // the divisors carry the whole scaling
      break;
  }
  // YaRN's extrapolation mix: on for YaRN unless the file says otherwise, off for the rest.
  if (c->ext_factor < 0.0f || c->scaling != RopeScaling::kYarn) c->ext_factor = c->scaling == RopeScaling::kYarn ? 1.0f : 0.0f;
  return Status();
}

}  // namespace hz
