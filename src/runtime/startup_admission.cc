#include "runtime/startup_admission.h"

#include <algorithm>

#include "base/log.h"
#include "planner/capacity_plan.h"

namespace hz {

namespace {

StartupAdmission skipped(std::string reason) {
  HZ_LOG_WARN("start-up memory check skipped: {}", reason);
  StartupAdmission a;
  a.skipped_reason = std::move(reason);
  return a;
}

}  // namespace

Result<StartupAdmission> admit_at_startup(const Result<ModelShape>& shape, const KvPlan& kv, const StartupDemand& d) {
  if (!shape.ok()) return skipped(fmt::format("cannot read the model's shape: {}", shape.status().message()));
  PlanOptions po;
  po.memory_bytes = d.available_ram_bytes;
  po.kv = kv.precision;
  po.max_num_seqs = static_cast<uint64_t>(d.max_num_seqs);
  po.max_model_len = static_cast<uint64_t>(d.max_model_len);
  po.block_tokens = static_cast<uint64_t>(kv.block_tokens);
  po.prefill_chunk_tokens = static_cast<uint64_t>(d.prefill_chunk);
  po.num_threads = static_cast<uint64_t>(std::max(1, d.threads));
  auto plan = make_plan(*shape, po);
  if (!plan.ok()) return skipped(fmt::format("cannot plan the model's memory: {}", plan.status().message()));
  if (!d.far_on_disk) HZ_RETURN_IF_ERROR(check_startup_fits(*plan));
  const uint64_t need = plan->weights_bytes + plan->overhead.total() + kv.budget_bytes;
  if (d.available_ram_bytes > 0 && need > d.available_ram_bytes)
    return out_of_range(
        "weights ({} MiB) + runtime ({} MiB) + KV budget ({} MiB) exceed the {} MiB of memory available; lower "
        "--kv-budget or --max-model-len, or use a quantized --kv-cache-dtype",
        plan->weights_bytes >> 20, plan->overhead.total() >> 20, kv.budget_bytes >> 20, d.available_ram_bytes >> 20);
  StartupAdmission a;
  a.checked = true;
  return a;
}

}  // namespace hz
