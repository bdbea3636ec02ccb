// The JSON twin of /metrics that the status page polls (GET /v1/status): queue, token, KV-tier and
// latency figures from one engine stats snapshot and the server's histograms.
#pragma once

#include <string>

#include "runtime/engine_api.h"
#include "server/metrics.h"

namespace hz {

// Counters are totals since start (the page takes differences between polls for rates); histograms
// come as bounds + per-bucket counts, so windowed percentiles can be computed from two polls.
std::string status_json(const EngineStats& stats, const ServerMetrics& metrics, const std::string& model_name);

}  // namespace hz
