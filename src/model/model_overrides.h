// ModelOverrides: settings a user may impose on a model file's own metadata at load time
// (command-line flags -> EngineOptions -> Model::load). Unset fields keep the file's values.
#pragma once

#include <cstdint>
#include <optional>

#include "model/model_config.h"

namespace hz {

struct RopeOverrides {
  std::optional<RopeScaling> scaling;  // --rope-scaling; kNone also drops rope_freqs.weight
  std::optional<float> freq_base;      // --rope-freq-base
  std::optional<float> freq_scale;     // --rope-freq-scale (1 / context extension factor)
  std::optional<int32_t> orig_ctx;     // --yarn-orig-ctx (YaRN / Llama 3 original context)
};

struct ModelOverrides {
  RopeOverrides rope;
};

}  // namespace hz
