// Server-side metrics and the Prometheus text exposition for /metrics. Latencies are measured here
// from event arrival times; queue, token and KV figures come from the engine's stats snapshot.
// Thread-safe: HTTP threads record, the /metrics handler renders.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine_api.h"

namespace hz {

// A cumulative histogram with fixed upper bounds (seconds), as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value, uint64_t times = 1);
  // Appends the # HELP / # TYPE lines and the _bucket/_sum/_count samples.
  void render(std::string& out, const std::string& name, const std::string& help) const;
  uint64_t count() const;

  struct Snapshot {
    std::vector<double> bounds;     // upper bounds, as given
    std::vector<uint64_t> buckets;  // [bounds.size() + 1] per-bucket counts, the last one +Inf; not cumulative
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // [bounds_.size() + 1], the last one is +Inf; not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void on_http_status(int status);
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  // One inter-token sample per token in an event: gap since the previous event / tokens.
  void observe_inter_token(double seconds_per_token, uint64_t num_tokens) { itl_.observe(seconds_per_token, num_tokens); }
  void on_request_finished(FinishReason reason, int32_t prompt_tokens, int32_t completion_tokens, double e2e_seconds);

  std::string render(const EngineStats& stats) const;

  const Histogram& ttft() const { return ttft_; }
  const Histogram& inter_token() const { return itl_; }

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> http_status_counts_;
  std::map<std::string, uint64_t> finish_counts_;
  uint64_t prompt_tokens_ = 0;
  uint64_t completion_tokens_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
};

}  // namespace hz
