// Server-side metrics and their two renderings: Prometheus text for /metrics and a JSON twin for
// /metrics.json (a status page polls it). Latencies and HTTP figures are measured here and live in a
// stats::Registry; queue, token and KV figures come from the engine's stats snapshot. Both are
// rendered generically from one stats::Snapshot. Thread-safe: HTTP threads record and render.
//
// /metrics.json shape (families in /metrics order; every /metrics family appears under its name):
//   {"time_unix_ms": 1764540000000,
//    "metrics": {
//      "horizon_requests_running": {"type": "gauge", "help": "...",
//                                   "series": [{"labels": {}, "value": 2}]},
//      "horizon_kv_blocks": {"type": "gauge", "help": "...",
//                            "series": [{"labels": {"tier": "ram"}, "value": 12}, ...]},
//      "horizon_time_to_first_token_seconds": {"type": "histogram", "help": "...",
//        "series": [{"labels": {}, "count": 3, "sum": 0.12,
//                    "buckets": [{"le": 0.001, "count": 0}, ...]}]}}}
// Counter and gauge values are JSON numbers (integers stay integers). Histogram buckets are
// cumulative and list the finite bounds only: the +Inf bucket is "count".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine_api.h"
#include "stats/registry.h"
#include "stats/snapshot.h"

namespace hz {

// Generic renderers of a snapshot.
std::string render_prometheus(const stats::Snapshot& snapshot);
std::string render_json(const stats::Snapshot& snapshot, int64_t time_unix_ms);

// A histogram that can render itself alone (Prometheus text).
class Histogram : public stats::Histogram {
 public:
  using stats::Histogram::Histogram;
  // Appends the # HELP / # TYPE lines and the _bucket/_sum/_count samples.
  void render(std::string& out, const std::string& name, const std::string& help) const;
};

struct MetricsOptions {
  std::string model_name;  // a model_name label first on every series, as vLLM's; empty = none
  bool vllm_names = false; // also vLLM's names for the same quantities (server/vllm_metrics.h)
};

class ServerMetrics {
 public:
  explicit ServerMetrics(MetricsOptions options = {});

  void on_http_status(int status);
  void on_rate_limited() { rate_limited_.inc(); }
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  // One inter-token sample per token in an event: gap since the previous event / tokens.
  void observe_inter_token(double seconds_per_token, uint64_t num_tokens) { itl_.observe(seconds_per_token, num_tokens); }
  // A request's last event (its counts and engine timings) and its time from arrival to that event.
  void on_request_finished(const GenerationEvent& final_event, double e2e_seconds);
  void on_request_finished(FinishReason reason, int32_t prompt_tokens, int32_t completion_tokens, double e2e_seconds);

  // The engine's statistics, then the server's (then vLLM's names), each series labelled by model.
  stats::Snapshot snapshot(const EngineStats& stats) const;
  std::string render(const EngineStats& stats) const;       // Prometheus text
  std::string render_json(const EngineStats& stats) const;  // the JSON twin, shape above

  const stats::Histogram& ttft() const { return ttft_; }
  const stats::Histogram& inter_token() const { return itl_; }

 private:
  MetricsOptions options_;
  stats::Registry registry_;
  stats::Histogram& ttft_;
  stats::Histogram& itl_;
  stats::Histogram& e2e_;
  stats::Histogram& queue_time_;
  stats::Histogram& prefill_time_;
  stats::Histogram& decode_time_;
  stats::Histogram& inference_time_;
  stats::Histogram& prompt_tokens_hist_;
  stats::Histogram& generation_tokens_hist_;
  stats::Histogram& max_tokens_hist_;
  stats::Counter& prompt_tokens_;
  stats::Counter& completion_tokens_;
  stats::LabeledCounter& finish_counts_;
  stats::LabeledCounter& http_status_counts_;
  stats::Counter& rate_limited_;
};

}  // namespace hz
