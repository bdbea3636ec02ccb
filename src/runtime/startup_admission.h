// Start-up admission: the planner's figures for weights + runtime + one sequence of
// --max-model-len must fit in the memory this machine has available, and so must the KV budget.
// When the model's shape cannot be read for the planner, the check is skipped as an explicit,
// logged decision (the model itself loaded, so the engine can run; only the estimate is missing).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "kv/kv_options.h"
#include "model/model_shape.h"

namespace hz {

struct StartupDemand {
  uint64_t available_ram_bytes = 0;
  int32_t max_num_seqs = 1;
  int32_t max_model_len = 0;
  int32_t prefill_chunk = 512;
  int32_t threads = 1;
  bool far_on_disk = false;  // with a disk tier a sequence's far blocks need not fit in RAM
};

struct StartupAdmission {
  bool checked = false;        // false: skipped, for `skipped_reason`
  std::string skipped_reason;
};

// An error when the figures do not fit; a skipped admission (logged as a warning) when `shape` or
// the plan made from it is an error.
Result<StartupAdmission> admit_at_startup(const Result<ModelShape>& shape, const KvPlan& kv, const StartupDemand& d);

}  // namespace hz
