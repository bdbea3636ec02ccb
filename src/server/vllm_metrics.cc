#include "server/vllm_metrics.h"

#include <vector>

namespace hz {
namespace {

struct Alias {
  const char* vllm;
  const char* horizon;
  const char* label_from = "";  // a label horizon names otherwise ("" = labels as they are)
  const char* label_to = "";
};

// One row per vLLM name. Help text is horizon's (the family it copies).
const Alias kAliases[] = {
    {"vllm:num_requests_running", "horizon_requests_running"},
    {"vllm:num_requests_waiting", "horizon_requests_waiting"},
    {"vllm:kv_cache_usage_perc", "horizon_kv_cache_usage_perc"},
    {"vllm:gpu_cache_usage_perc", "horizon_kv_cache_usage_perc"},  // the name before kv_cache_usage_perc
    {"vllm:prompt_tokens_total", "horizon_prompt_tokens_total"},
    {"vllm:generation_tokens_total", "horizon_generation_tokens_total"},
    {"vllm:num_preemptions_total", "horizon_preemptions_total"},
    {"vllm:request_success_total", "horizon_requests_finished_total", "finish_reason", "finished_reason"},
    {"vllm:time_to_first_token_seconds", "horizon_time_to_first_token_seconds"},
    {"vllm:inter_token_latency_seconds", "horizon_inter_token_latency_seconds"},
    {"vllm:time_per_output_token_seconds", "horizon_inter_token_latency_seconds"},  // the older name
    {"vllm:e2e_request_latency_seconds", "horizon_e2e_request_latency_seconds"},
    {"vllm:request_queue_time_seconds", "horizon_request_queue_time_seconds"},
    {"vllm:request_prefill_time_seconds", "horizon_request_prefill_time_seconds"},
    {"vllm:request_decode_time_seconds", "horizon_request_decode_time_seconds"},
    {"vllm:request_inference_time_seconds", "horizon_request_inference_time_seconds"},
    {"vllm:request_prompt_tokens", "horizon_request_prompt_tokens"},
    {"vllm:request_generation_tokens", "horizon_request_generation_tokens"},
    {"vllm:request_max_num_generation_tokens", "horizon_request_max_tokens"},
};

}  // namespace

void add_vllm_names(stats::Snapshot& snapshot) {
  std::vector<stats::Family> added;
  for (const Alias& a : kAliases) {
    const stats::Family* f = snapshot.find(a.horizon);
    if (f == nullptr) continue;
    stats::Family copy = *f;
    copy.name = a.vllm;
    if (a.label_from[0] != '\0') {
      for (stats::Series& s : copy.series) {
        for (auto& [k, v] : s.labels) {
          if (k == a.label_from) k = a.label_to;
        }
      }
    }
    added.push_back(std::move(copy));
  }
  // NOTE: family() may reallocate the snapshot's families, so the copies go in after the lookups.
  for (stats::Family& f : added) snapshot.family(f.name, f.help, f.kind).series = std::move(f.series);
  // vLLM's V0 dashboards plot these; horizon preempts by recomputation and keeps no swap space.
  snapshot.add("vllm:num_requests_swapped", "Requests swapped out to CPU memory: always 0 (horizon recomputes).",
               stats::Kind::kGauge, {}, int64_t{0});
  snapshot.add("vllm:cpu_cache_usage_perc", "CPU swap space in use: always 0 (horizon has none).", stats::Kind::kGauge,
               {}, 0.0);
}

}  // namespace hz
