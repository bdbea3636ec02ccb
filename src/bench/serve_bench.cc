#include "bench/serve_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "bench/conditions.h"
#include "bench/http_client.h"
#include "bench/stats.h"

namespace hz::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct RequestRecord {
  bool ok = false;
  int status = 0;  // HTTP status (0: no answer)
  double start_s = 0;  // since the run started
  std::string error;
  double ttft_s = 0, e2e_s = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::vector<double> itl_s;  // gaps between text-bearing chunks
};

// Splits an SSE byte stream into `data:` payloads.
class SseReader {
 public:
  template <typename Fn>
  void feed(std::string_view bytes, Fn&& on_data) {
    buf_.append(bytes);
    size_t pos = 0;
    for (;;) {
      size_t eol = buf_.find('\n', pos);
      if (eol == std::string::npos) break;
      std::string_view line(buf_.data() + pos, eol - pos);
      pos = eol + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, 5) == "data:") {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        on_data(line);
      }
    }
    buf_.erase(0, pos);
  }

 private:
  std::string buf_;
};

const char* kWords[] = {"the", "time", "people", "water", "house", "light", "world", "river", "story", "garden",
                        "little", "friend", "morning", "window", "music", "table", "forest", "summer"};

std::string synthetic_prompt(int64_t index, int32_t tokens) {
  // A distinct head per request so that a prefix cache cannot serve the whole prompt.
  std::string p = "Request " + std::to_string(index) + ":";
  uint64_t x = static_cast<uint64_t>(index) * 2654435761u + 1;
  for (int32_t i = 0; i < tokens; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p += ' ';
    p += kWords[(x >> 33) % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return p;
}

RequestRecord one_request(const HttpUrl& url, const ServeBenchOptions& o, const std::string& model,
                          const std::string& prompt) {
  RequestRecord r;
  json body = {{"prompt", prompt},
               {"max_tokens", o.output_tokens},
               {"ignore_eos", true},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!model.empty()) body["model"] = model;
  HttpRequest req;
  req.path = "/v1/completions";
  req.body = body.dump();
  req.bearer_token = o.api_key;
  req.timeout_ms = static_cast<int>(std::min(o.timeout_s, 86400.0) * 1000);
  SseReader sse;
  int64_t text_chunks = 0;
  bool got_usage = false;
  const auto t0 = Clock::now();
  Clock::time_point last{};
  // A non-200 body is not SSE: no `data:` lines, nothing counted; the status decides below.
  std::string head;  // the body's beginning: a refusal's error message
  auto on_body = [&](std::string_view bytes) {
    const auto now = Clock::now();
    if (head.size() < 4096) head.append(bytes.substr(0, 4096 - head.size()));
    sse.feed(bytes, [&](std::string_view data) {
      if (data == "[DONE]") return;
      json j = json::parse(data, nullptr, false);
      if (!j.is_object()) return;
      if (j.contains("error")) {
        r.error = j["error"].is_object() ? j["error"].value("message", std::string("error event")) : "error event";
        return;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        got_usage = true;
        r.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{0});
        r.completion_tokens = j["usage"].value("completion_tokens", int64_t{0});
      }
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const json& c = j["choices"][0];
        std::string text;
        if (c.contains("text") && c["text"].is_string()) text = c["text"];
        if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
            c["delta"]["content"].is_string()) {
          text = c["delta"]["content"];
        }
        if (text.empty()) return;
        if (text_chunks == 0) {
          r.ttft_s = std::chrono::duration<double>(now - t0).count();
        } else {
          r.itl_s.push_back(std::chrono::duration<double>(now - last).count());
        }
        last = now;
        ++text_chunks;
      }
    });
  };
  auto res = http_call(url, req, on_body);
  r.e2e_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!res.ok()) {
    r.error = res.status().message();
    return r;
  }
  r.status = *res;
  if (*res != 200) {
    r.error = "HTTP " + std::to_string(*res);
    json body = json::parse(head, nullptr, false);
    if (body.is_object() && body.contains("error") && body["error"].is_object() && body["error"].contains("message") &&
        body["error"]["message"].is_string())
      r.error += ": " + body["error"]["message"].get<std::string>();
    return r;
  }
  if (!r.error.empty()) return r;
  if (text_chunks == 0) {
    r.error = "no tokens in the stream";
    return r;
  }
  if (!got_usage) r.completion_tokens = text_chunks;  // a server without include_usage: chunks ~ tokens
  r.ok = true;
  return r;
}

json latency_json(const std::vector<double>& v_s) {
  std::vector<double> ms;
  ms.reserve(v_s.size());
  for (double s : v_s) ms.push_back(s * 1000);
  Summary s = summarize(ms);
  return {{"mean", s.mean},
          {"min", s.min},
          {"max", s.max},
          {"p50", percentile(ms, 50)},
          {"p95", percentile(ms, 95)},
          {"p99", percentile(ms, 99)},
          {"count", s.count}};
}

Result<std::string> first_model_id(const HttpUrl& url, const ServeBenchOptions& o) {
  HttpRequest req;
  req.method = "GET";
  req.path = "/v1/models";
  req.bearer_token = o.api_key;
  req.timeout_ms = 30000;
  std::string body;
  HZ_ASSIGN_OR_RETURN(int status, http_call(url, req, [&](std::string_view b) { body.append(b); }));
  if (status != 200) return io_error("GET {}/v1/models answered HTTP {}; give the model with --model", o.url, status);
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return io_error("GET {}/v1/models lists no model; give one with --model", o.url);
  }
  return j["data"][0]["id"].get<std::string>();
}

}  // namespace

uint64_t process_peak_rss(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 6, "VmHWM:") == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

Result<json> run_serve_bench(const ServeBenchOptions& o, const ServeProgressFn& progress) {
  if (o.concurrency < 1 || o.concurrency > 4096) return invalid_argument("-c: concurrency {} not in 1..4096", o.concurrency);
  if ((o.requests > 0) == (o.duration_s > 0)) {
    return invalid_argument("give exactly one of --requests R (> 0) and --duration T (> 0)");
  }
  if (o.requests < 0 || o.duration_s < 0) return invalid_argument("--requests and --duration must be positive");
  if (o.input_tokens < 1) return invalid_argument("--input-tokens: {} must be at least 1", o.input_tokens);
  if (o.output_tokens < 1) return invalid_argument("--output-tokens: {} must be at least 1", o.output_tokens);
  if (!(o.timeout_s > 0)) return invalid_argument("--timeout must be > 0");
  if (!(o.request_rate >= 0) || !std::isfinite(o.request_rate))
    return invalid_argument("--request-rate: {} is not a rate in requests per second (0 = back to back)", o.request_rate);
  if (o.pid < 0) return invalid_argument("--pid: {} is not a process id", o.pid);
  if (o.pid > 0 && process_peak_rss(o.pid) == 0) {
    return invalid_argument("--pid {}: no such local process (or /proc/{}/status unreadable)", o.pid, o.pid);
  }
  HZ_ASSIGN_OR_RETURN(HttpUrl url, parse_http_url(o.url, "--url"));
  std::vector<std::string> prompts;
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file);
    if (!in) return not_found("--prompt-file '{}' cannot be opened", o.prompt_file);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) prompts.push_back(line);
    }
    if (prompts.empty()) return invalid_argument("--prompt-file '{}' has no non-empty line", o.prompt_file);
  }
  std::string model = o.model;
  if (model.empty()) {
    HZ_ASSIGN_OR_RETURN(model, first_model_id(url, o));
  }

  std::vector<RequestRecord> records;
  std::mutex mu;
  std::atomic<int64_t> completed{0}, rejected{0}, errors{0};
  // Arrivals, taken in order by the clients under arrivals_mu: request i starts at its arrival time
  // (open loop, --request-rate) or as soon as a client is free.
  std::mutex arrivals_mu;
  int64_t issued = 0;
  double next_arrival_s = 0;
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap_s(o.request_rate > 0 ? o.request_rate : 1.0);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  auto worker = [&] {
    for (;;) {
      int64_t i;
      double arrival_s = 0;
      {
        std::lock_guard<std::mutex> lk(arrivals_mu);
        if (o.requests > 0 && issued >= o.requests) return;
        if (o.request_rate > 0) {
          arrival_s = next_arrival_s;
          if (o.duration_s > 0 && arrival_s >= o.duration_s) return;
          next_arrival_s += gap_s(rng);
        } else if (o.duration_s > 0 && Clock::now() >= deadline) {
          return;
        }
        i = issued++;
      }
      if (o.request_rate > 0)
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival_s)));
      const std::string prompt = prompts.empty() ? synthetic_prompt(i, o.input_tokens) : prompts[i % prompts.size()];
      const double start_s = std::chrono::duration<double>(Clock::now() - start).count();
      RequestRecord r = one_request(url, o, model, prompt);
      r.start_s = start_s;
      (r.ok ? completed : r.status == 429 ? rejected : errors).fetch_add(1);
      std::lock_guard<std::mutex> lk(mu);
      records.push_back(std::move(r));
    }
  };
  std::vector<std::thread> threads;
  for (int32_t i = 0; i < o.concurrency; ++i) threads.emplace_back(worker);
  std::atomic<bool> finished{false};
  std::thread ticker;
  if (progress) {
    ticker = std::thread([&] {
      while (!finished.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        progress(completed.load(), rejected.load(), errors.load());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  finished = true;
  if (ticker.joinable()) ticker.join();

  std::vector<double> ttft, tpot, itl, e2e;
  int64_t out_tokens = 0, in_tokens = 0;
  json error_samples = json::array();
  json timeline = json::array();
  std::sort(records.begin(), records.end(), [](const RequestRecord& a, const RequestRecord& b) { return a.start_s < b.start_s; });
  for (const auto& r : records) {
    if (o.timeline) {
      timeline.push_back({{"start_s", r.start_s},
                          {"outcome", r.ok ? "completed" : r.status == 429 ? "rejected" : "error"},
                          {"ttft_ms", r.ok ? r.ttft_s * 1000 : 0.0},
                          {"e2e_ms", r.e2e_s * 1000}});
    }
    if (!r.ok) {
      if (r.status != 429 && error_samples.size() < 5) error_samples.push_back(r.error);
      continue;
    }
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.completion_tokens > 1) tpot.push_back((r.e2e_s - r.ttft_s) / static_cast<double>(r.completion_tokens - 1));
    out_tokens += r.completion_tokens;
    in_tokens += r.prompt_tokens;
  }
  const int64_t n_ok = completed.load(), n_429 = rejected.load(), n_err = errors.load(), n = n_ok + n_429 + n_err;
  json cond = host_conditions();
  cond["url"] = o.url;
  cond["model"] = model;
  cond["endpoint"] = "/v1/completions (stream, ignore_eos)";
  cond["concurrency"] = o.concurrency;
  cond["arrivals"] = o.request_rate > 0 ? "poisson" : "back to back";
  cond["request_rate"] = o.request_rate;
  if (o.request_rate > 0) cond["seed"] = o.seed;
  cond["requests_target"] = o.requests;
  cond["duration_target_s"] = o.duration_s;
  cond["input_tokens_target"] = o.input_tokens;
  cond["prompt_source"] = o.prompt_file.empty() ? std::string("synthetic") : o.prompt_file;
  cond["output_tokens"] = o.output_tokens;
  if (o.pid > 0) cond["server_pid"] = o.pid;

  json rep = {{"mode", "serve"}, {"conditions", cond}};
  rep["requests"] = n;
  rep["completed"] = n_ok;
  // Refusals (429: the server's queue was full) are the server protecting itself under load, not
  // failures: counted apart from errors.
  rep["rejected"] = n_429;
  rep["rejected_rate"] = n > 0 ? static_cast<double>(n_429) / static_cast<double>(n) : 0.0;
  rep["errors"] = n_err;
  rep["error_rate"] = n > 0 ? static_cast<double>(n_err) / static_cast<double>(n) : 0.0;
  rep["error_samples"] = error_samples;
  rep["duration_s"] = wall_s;
  rep["request_throughput_per_s"] = wall_s > 0 ? static_cast<double>(n_ok) / wall_s : 0.0;
  rep["output_tokens"] = out_tokens;
  rep["output_tokens_per_s"] = wall_s > 0 ? static_cast<double>(out_tokens) / wall_s : 0.0;
  rep["mean_prompt_tokens"] = n_ok > 0 ? static_cast<double>(in_tokens) / static_cast<double>(n_ok) : 0.0;
  rep["mean_output_tokens"] = n_ok > 0 ? static_cast<double>(out_tokens) / static_cast<double>(n_ok) : 0.0;
  rep["ttft_ms"] = latency_json(ttft);
  rep["tpot_ms"] = latency_json(tpot);
  rep["itl_ms"] = latency_json(itl);
  rep["e2e_latency_ms"] = latency_json(e2e);
  if (o.pid > 0) rep["server_peak_rss_bytes"] = process_peak_rss(o.pid);
  if (o.timeline) rep["timeline"] = std::move(timeline);
  return rep;
}

std::vector<PlotSpec> serve_plots(const json& rep) {
  const json& c = rep["conditions"];
  const std::string load =
      c.value("request_rate", 0.0) > 0
          ? fmt::format("{:g} requests/s (Poisson), at most {} at once", c.value("request_rate", 0.0), c.value("concurrency", 0))
          : fmt::format("{} clients back to back", c.value("concurrency", 0));
  const std::string subtitle = fmt::format("{}; input ~{} tokens, output {} tokens", load,
                                           c.value("input_tokens_target", 0), c.value("output_tokens", 0));
  PlotSpec latency{"latency of each request", subtitle, "request start (s)", "ms", {{"TTFT", {}}, {"end to end", {}}}};
  PlotSpec outcomes{"requests finished per second", subtitle, "time (s)", "requests/s",
                    {{"completed", {}}, {"refused (429)", {}}, {"errors", {}}}};
  std::vector<std::array<double, 3>> per_second;
  for (const json& t : rep.value("timeline", json::array())) {
    const double start_s = t.value("start_s", 0.0), e2e_ms = t.value("e2e_ms", 0.0);
    const std::string outcome = t.value("outcome", "");
    if (outcome == "completed") {
      latency.series[0].points.emplace_back(start_s, t.value("ttft_ms", 0.0));
      latency.series[1].points.emplace_back(start_s, e2e_ms);
    }
    const auto second = static_cast<size_t>(std::max(0.0, start_s + e2e_ms / 1000));
    if (per_second.size() <= second) per_second.resize(second + 1, {0, 0, 0});
    per_second[second][outcome == "completed" ? 0 : outcome == "rejected" ? 1 : 2] += 1;
  }
  for (size_t s = 0; s < per_second.size(); ++s) {
    for (size_t k = 0; k < 3; ++k) outcomes.series[k].points.emplace_back(static_cast<double>(s) + 0.5, per_second[s][k]);
  }
  return {latency, outcomes};
}

}  // namespace hz::bench
