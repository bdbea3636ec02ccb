#include "tools/model_sampling.h"

#include "base/log.h"
#include "format/gguf.h"

namespace hz::cli {

ModelSampling model_sampling(const GgufFile& meta) {
  ModelSampling s;
  auto get = [&](const char* key, double lo, double hi, std::optional<float>* out) {
    if (!meta.has(key)) return;
    auto v = meta.get_float_or(key, 0.0);
    if (!v.ok() || !(*v >= lo && *v <= hi)) {
      HZ_LOG_WARN("the model's {} ({}) is out of range and is not used", key, v.ok() ? *v : 0.0);
      return;
    }
    *out = static_cast<float>(*v);
  };
  get("general.sampling.temp", 0.0, 2.0, &s.temperature);
  get("general.sampling.top_p", 1e-6, 1.0, &s.top_p);
  get("general.sampling.min_p", 0.0, 1.0, &s.min_p);
  get("general.sampling.penalty_repeat", 1e-6, 10.0, &s.repetition_penalty);
  if (meta.has("general.sampling.top_k")) {
    auto k = meta.get_int_or("general.sampling.top_k", 0);
    if (k.ok() && *k >= 0 && *k <= (1 << 20)) {
      s.top_k = static_cast<int32_t>(*k);
    } else {
      HZ_LOG_WARN("the model's general.sampling.top_k is out of range and is not used");
    }
  }
  return s;
}

}  // namespace hz::cli
