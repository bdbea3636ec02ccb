// libFuzzer target for config.json: any bytes through the bounded JSON parse, then the engine's
// reader (ModelConfig::from_hf_config, and back to GGUF metadata) and the planner's
// (model_shape_from_hf_config) and quantization_config's (parse_hf_quant_config): a config or an
// error with a message, never a crash.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "format/json_limits.h"
#include "model/hf_config.h"
#include "model/hf_quant.h"
#include "model/model_config.h"
#include "model/model_shape.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = hz::parse_json_bounded(text, "config.json");
  if (!j.ok()) {
    if (j.status().message().empty()) __builtin_trap();
    return 0;
  }
  auto cfg = hz::ModelConfig::from_hf_config(*j, "config.json");
  if (cfg.ok()) {
    if (cfg->vocab < 1 || cfg->num_layers < 1 || cfg->num_heads % cfg->num_kv_heads != 0) __builtin_trap();
    auto kv = hz::gguf_hparams(*cfg);
    if (kv.empty()) __builtin_trap();
  } else if (cfg.status().message().empty()) {
    __builtin_trap();
  }
  auto quant = hz::parse_hf_quant_config(*j, "config.json");
  if (quant.ok()) {
    if (quant->describe().empty()) __builtin_trap();
  } else if (quant.status().message().empty()) {
    __builtin_trap();
  }
  auto shape = hz::model_shape_from_hf_config(*j, "config.json");
  if (!shape.ok() && shape.status().message().empty()) __builtin_trap();
  return 0;
}
