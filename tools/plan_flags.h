// The planner's command-line flags, shared by `horizon plan` and `horizon doctor`.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "base/byte_size.h"
#include "planner/capacity_plan.h"
#include "planner/host_info.h"

namespace hz::cli {

struct PlanFlags {
  std::string memory;            // "" = available RAM
  std::string weight_type;       // "" = the file's own
  std::string kv_cache_dtype = "f16";
  uint64_t kv_hot_window = 0;
  std::string kv_cold_dtype;     // "" = int4 when a window is set
  uint64_t max_num_seqs = 1;
  uint64_t max_model_len = 0;
  uint64_t block_tokens = 16;
  uint64_t threads = 0;          // 0 = this machine's CPUs

  void add_to(CLI::App& app) {
    app.add_option("--memory", memory, "Memory budget, e.g. 24GiB, 512MiB or 50% (default: available RAM)");
    app.add_option("--weight-type", weight_type, "Plan for weights of this type: f32 f16 bf16 q8_0 q6_K q5_K q4_K q4_0");
    app.add_option("--kv-cache-dtype", kv_cache_dtype, "KV type: f32 f16 bf16 fp8 int8 int4")->capture_default_str();
    app.add_option("--kv-hot-window", kv_hot_window, "Keep the newest N tokens at --kv-cache-dtype, older ones at --kv-cold-dtype");
    app.add_option("--kv-cold-dtype", kv_cold_dtype, "KV type beyond the hot window (default int4)");
    app.add_option("--max-num-seqs", max_num_seqs, "Concurrent sequences")->capture_default_str();
    app.add_option("--max-model-len,--ctx", max_model_len, "Context per sequence (default: the model's limit)");
    app.add_option("--kv-block-size", block_tokens, "Tokens per KV block")->capture_default_str();
    app.add_option("--threads,-t", threads, "Threads (default: this machine's CPUs)");
  }

  // Flags to options; errors name the flag.
  Result<PlanOptions> to_options(const HostInfo& host) const {
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
    auto hot = kv_type_from_name(kv_cache_dtype);
    if (!hot) return invalid_argument("--kv-cache-dtype: '{}' is not one of f32 f16 bf16 fp8 int8 int4", kv_cache_dtype);
    o.kv.hot = *hot;
    o.kv.cold = *hot;
    o.kv.hot_window = kv_hot_window;
    if (!kv_cold_dtype.empty()) {
      auto cold = kv_type_from_name(kv_cold_dtype);
      if (!cold) return invalid_argument("--kv-cold-dtype: '{}' is not one of f32 f16 bf16 fp8 int8 int4", kv_cold_dtype);
      if (kv_hot_window == 0) return invalid_argument("--kv-cold-dtype needs --kv-hot-window N");
      o.kv.cold = *cold;
    } else if (kv_hot_window > 0) {
      o.kv.cold = KvType::kInt4;
    }
    if (max_num_seqs == 0) return invalid_argument("--max-num-seqs must be at least 1");
    o.max_num_seqs = max_num_seqs;
    o.max_model_len = max_model_len;
    if (block_tokens == 0 || block_tokens > 4096) return invalid_argument("--kv-block-size {} is out of range (1..4096)", block_tokens);
    o.block_tokens = block_tokens;
    o.num_threads = threads > 0 ? threads : std::max<uint64_t>(host.num_cpus, 1);
    return o;
  }
};

}  // namespace hz::cli
