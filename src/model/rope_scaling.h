// RoPE scaling resolution: reads `<arch>.rope.*` metadata and an optional rope_freqs.weight tensor
// into a RopeConfig, applies user overrides, and derives what the formulas need (Llama 3 divisors,
// YaRN defaults). The per-angle arithmetic itself lives in model/rope.cc.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "format/gguf.h"
#include "model/model_config.h"
#include "model/model_overrides.h"

namespace hz {

// "none", "linear", "ntk", "yarn", "llama3" -> enum; `what` names the field in the error.
Result<RopeScaling> parse_rope_scaling(std::string_view name, std::string_view what);
const char* rope_scaling_name(RopeScaling s);

// Reads the RoPE metadata of architecture prefix `prefix` ("llama.") for a model with `head_dim`
// and training context `train_ctx`. Errors name the key or tensor.
Result<RopeConfig> read_rope_config(const GgufFile& f, const std::string& prefix, int32_t head_dim, int32_t train_ctx,
                                    RopeLayout layout);

// Applies `o` on top of `c` and finalises it (Llama 3 divisors computed when no tensor gave them).
// Errors name the flag.
Status apply_rope_overrides(const RopeOverrides& o, RopeConfig* c);

// Llama 3.1's per-pair frequency divisors ([dim / 2]) for `freq_base`, `factor`, low/high frequency
// factors and the original context: 1 for short wavelengths, `factor` for long ones, a smooth
// interpolation between.
std::vector<float> llama3_freq_factors(int32_t dim, float freq_base, float factor, float low_freq_factor,
                                       float high_freq_factor, int32_t orig_ctx);

}  // namespace hz
