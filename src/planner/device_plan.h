// The device-memory plan of `horizon plan --device cuda`: weights, runtime reserve, activations
// and attention scratch of one step, and the KV cache in what is left of the GPU's memory. Pure
// functions over the host plan's figures; the device size comes from the GPU or --device-memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "planner/capacity_plan.h"

namespace hz {

struct DevicePlan {
  std::string device;                 // GPU name, or "--device-memory"
  uint64_t device_bytes = 0;
  uint64_t reserve_bytes = 0;         // CUDA context, allocator slack, graphs
  std::string weight_type;            // what the weights figure refers to
  uint64_t weights_bytes = 0;
  std::string weight_note;            // set when tensors of a type the GPU lacks are planned converted
  uint64_t activation_bytes = 0;      // f32/Q8_0 activations of one step (a prefill chunk) and the logits
  uint64_t attention_scratch_bytes = 0;  // split-KV partials of one step at the requested context
  uint64_t table_bytes = 0;           // block-descriptor tables of one step
  uint64_t kv_budget_bytes = 0;       // what is left for the KV cache (0 when nothing is)
  uint64_t requested_context = 0;
  uint64_t requested_kv_bytes = 0;
  uint64_t max_num_seqs = 1;
  uint64_t max_tokens_at_requested = 0;  // largest context per sequence at max_num_seqs
  std::vector<std::pair<uint64_t, uint64_t>> max_context;  // (concurrency, tokens) at the requested KV type
  bool fits = false;
};

// Plans `host` (make_plan's report for the same options; its weights and shape) on a device of
// `device_bytes`. `weights_on_device` is host's weights figure when every matrix type is one the
// GPU reads (f32 f16 bf16 q8_0 q4_0), else the caller passes the q8_0 figure and a note. Errors name
// the flag: the hot window and MLA models are not planned on the GPU yet.
Result<DevicePlan> make_device_plan(const PlanReport& host, const std::string& device, uint64_t device_bytes,
                                    const std::string& weight_type, uint64_t weights_on_device, const std::string& weight_note);

nlohmann::ordered_json device_plan_to_json(const DevicePlan& p);
std::string device_plan_to_text(const DevicePlan& p);

}  // namespace hz
