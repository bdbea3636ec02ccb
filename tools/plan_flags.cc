#include "tools/plan_flags.h"

#include <algorithm>

#include "base/byte_size.h"

namespace hz::cli {

void PlanFlags::add_to(CLI::App& app) {
  app.add_option("--memory", memory, "Memory budget, e.g. 24GiB, 512MiB or 50% (default: available RAM)");
  app.add_option("--weight-type", weight_type, "Plan for weights of this type: f32 f16 bf16 q8_0 q6_K q5_K q4_K q4_0");
}

Result<PlanOptions> PlanFlags::to_options(const EngineOptions& e, const HostInfo& host) const {
  PlanOptions o;
  if (memory.empty()) {
    o.memory_bytes = host.available_ram_bytes;
    if (o.memory_bytes == 0) return invalid_argument("--memory: cannot read the available RAM; give a budget");
  } else {
    HZ_ASSIGN_OR_RETURN(o.memory_bytes, parse_byte_size(memory, "--memory", host.available_ram_bytes));
  }
  if (!weight_type.empty()) {
    auto t = dtype_from_name(weight_type);
    bool plannable = false;
    for (DType p : plannable_weight_types()) plannable |= t && *t == p;
    if (!plannable) return invalid_argument("--weight-type: '{}' is not one of f32 f16 bf16 q8_0 q6_K q5_K q4_K q4_0", weight_type);
    o.weight_type = *t;
  }
  o.kv = kv_precision(e);
  if (e.max_num_seqs < 1) return invalid_argument("--max-num-seqs must be at least 1");
  o.max_num_seqs = static_cast<uint64_t>(e.max_num_seqs);
  o.max_model_len = static_cast<uint64_t>(std::max(0, e.max_model_len));
  o.block_tokens = static_cast<uint64_t>(e.block_size);
  o.prefill_chunk_tokens = static_cast<uint64_t>(std::max(1, e.prefill_chunk));
  o.num_threads = e.threads > 0 ? static_cast<uint64_t>(e.threads) : std::max<uint64_t>(host.num_cpus, 1);
  return o;
}

}  // namespace hz::cli
