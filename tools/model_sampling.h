// A model's own sampling defaults (its generation_config.json, carried as GGUF general.sampling.*):
// what `serve` gives requests that leave a field out (--generation-config auto) and what `run` and
// `chat` use for the flags not given.
#pragma once

#include <cstdint>
#include <optional>

namespace hz {
class GgufFile;
}

namespace hz::cli {

// Each value only when the model has it and it is in the range a request takes (one that is not
// is logged and left out).
struct ModelSampling {
  std::optional<float> temperature;  // [0, 2]
  std::optional<float> top_p;        // (0, 1]
  std::optional<float> min_p;        // [0, 1]
  std::optional<float> repetition_penalty;  // (0, 10]
  std::optional<int32_t> top_k;      // [0, 2^20]
};
ModelSampling model_sampling(const GgufFile& meta);

}  // namespace hz::cli
