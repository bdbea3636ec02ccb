// `horizon bench serve`: drives an OpenAI-compatible server (/v1/completions, streamed) with N
// concurrent clients for R requests or T seconds, back to back or at a request rate (Poisson
// arrivals), and reports TTFT, TPOT, inter-token and end-to-end latency percentiles, throughput,
// refusals (429), errors and the server's peak RSS.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/svg_plot.h"

namespace hz::bench {

struct ServeBenchOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string api_key;
  std::string model;      // "" : the first id of GET /v1/models
  int32_t concurrency = 1;
  int64_t requests = 0;   // stop after this many (0: use duration)
  double duration_s = 0;  // or start requests for this long
  int32_t input_tokens = 128;   // synthetic prompt length (about; the server's count is reported)
  int32_t output_tokens = 64;   // max_tokens, with ignore_eos
  std::string prompt_file;      // one prompt per non-empty line, used round-robin
  int64_t pid = 0;              // local server process for peak RSS (0: none)
  double timeout_s = 600;       // per request, between two reads
  // Requests per second arriving as a Poisson process (exponential gaps, drawn from `seed`); the
  // clients (concurrency) cap how many run at once. 0: each client sends its next request at once.
  double request_rate = 0;
  uint64_t seed = 1;
  bool timeline = false;        // add "timeline": one entry per request (start, latencies, outcome)
};

// Charts of a report made with timeline on: latency of each request against its start time, and
// requests finished per second (completed, refused with 429, failed).
std::vector<PlotSpec> serve_plots(const nlohmann::json& report);

// Called about once a second with the requests completed, refused (HTTP 429) and failed so far.
using ServeProgressFn = std::function<void(int64_t completed, int64_t rejected, int64_t errors)>;

// Errors: bad options (naming the flag) or a server that cannot be reached at all. Request
// failures are counted in the report, not returned.
Result<nlohmann::json> run_serve_bench(const ServeBenchOptions& o, const ServeProgressFn& progress = nullptr);

// Peak resident set (VmHWM) of a local process in bytes; 0 when unknown.
uint64_t process_peak_rss(int64_t pid);

}  // namespace hz::bench
