#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "server/vllm_metrics.h"

namespace hz {
namespace {

// Buckets of the per-request time histograms (queue, prefill, decode, end to end), in seconds.
const std::vector<double> kRequestSeconds = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1,  1.5, 2,   2.5, 5,
                                             10,   15,   20,  30,  40,  50,  60, 120, 240, 480, 960};
// Buckets of the per-request token histograms: 1, 2, 5, 10, ... 1M tokens.
std::vector<double> token_buckets() {
  std::vector<double> b;
  for (double scale = 1; scale <= 1e6; scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * scale <= 1e6) b.push_back(m * scale);
    }
  }
  return b;
}

// Prometheus label values escape backslash, double quote and newline.
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"}, or nothing for no labels; `extra` (le="...") goes last.
std::string label_text(const stats::Labels& labels, const std::string& extra = "") {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    if (out.size() > 1) out += ',';
    out += fmt::format("{}=\"{}\"", k, escape_label(v));
  }
  if (!extra.empty()) {
    if (out.size() > 1) out += ',';
    out += extra;
  }
  return out + "}";
}

std::string value_text(const stats::Value& v) {
  return std::visit([](auto x) { return fmt::format("{}", x); }, v);
}

void render_family(std::string& out, const stats::Family& f) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name, stats::kind_name(f.kind));
  for (const stats::Series& s : f.series) {
    if (f.kind != stats::Kind::kHistogram) {
      out += fmt::format("{}{} {}\n", f.name, label_text(s.labels), value_text(s.value));
      continue;
    }
    const stats::HistogramData& h = s.histogram;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      out += fmt::format("{}_bucket{} {}\n", f.name, label_text(s.labels, fmt::format("le=\"{}\"", h.bounds[i])),
                         cumulative);
    }
    cumulative += h.counts.back();
    out += fmt::format("{}_bucket{} {}\n{}_sum{} {}\n{}_count{} {}\n", f.name, label_text(s.labels, "le=\"+Inf\""),
                       cumulative, f.name, label_text(s.labels), h.sum, f.name, label_text(s.labels), h.count);
  }
}

}  // namespace

std::string render_prometheus(const stats::Snapshot& snapshot) {
  std::string out;
  for (const stats::Family& f : snapshot.families()) render_family(out, f);
  return out;
}

std::string render_json(const stats::Snapshot& snapshot, int64_t time_unix_ms) {
  using nlohmann::json;
  json metrics = json::object();
  for (const stats::Family& f : snapshot.families()) {
    json series = json::array();
    for (const stats::Series& s : f.series) {
      json labels = json::object();
      for (const auto& [k, v] : s.labels) labels[k] = v;
      json one = {{"labels", std::move(labels)}};
      if (f.kind == stats::Kind::kHistogram) {
        const stats::HistogramData& h = s.histogram;
        json buckets = json::array();
        uint64_t cumulative = 0;
        for (size_t i = 0; i < h.bounds.size(); ++i) {
          cumulative += h.counts[i];
          buckets.push_back({{"le", h.bounds[i]}, {"count", cumulative}});
        }
        one["count"] = h.count;
        one["sum"] = h.sum;
        one["buckets"] = std::move(buckets);
      } else {
        std::visit([&](auto x) { one["value"] = x; }, s.value);
      }
      series.push_back(std::move(one));
    }
    metrics[f.name] = {{"type", stats::kind_name(f.kind)}, {"help", f.help}, {"series", std::move(series)}};
  }
  return json{{"time_unix_ms", time_unix_ms}, {"metrics", std::move(metrics)}}.dump();
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  stats::Snapshot one;
  one.family(name, help, stats::Kind::kHistogram).series.emplace_back().histogram = data();
  out += render_prometheus(one);
}

ServerMetrics::ServerMetrics(MetricsOptions options)
    : options_(std::move(options)),
      ttft_(registry_.histogram(
          "horizon_time_to_first_token_seconds", "Time from request arrival to the first token.",
          {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80})),
      itl_(registry_.histogram("horizon_inter_token_latency_seconds", "Time between consecutive output tokens.",
                               {0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                0.4, 0.5, 0.75, 1, 2.5})),
      e2e_(registry_.histogram("horizon_e2e_request_latency_seconds", "Time from request arrival to its last token.",
                               kRequestSeconds)),
      queue_time_(registry_.histogram("horizon_request_queue_time_seconds",
                                      "Time requests waited in the engine's queue before first scheduled.",
                                      kRequestSeconds)),
      prefill_time_(registry_.histogram("horizon_request_prefill_time_seconds",
                                        "Time from first scheduled to the first token (the prompt's prefill).",
                                        kRequestSeconds)),
      decode_time_(registry_.histogram("horizon_request_decode_time_seconds",
                                       "Time from the first token to the last (decoding).", kRequestSeconds)),
      inference_time_(registry_.histogram("horizon_request_inference_time_seconds",
                                          "Time from first scheduled to the last token (prefill + decode).",
                                          kRequestSeconds)),
      prompt_tokens_hist_(registry_.histogram("horizon_request_prompt_tokens", "Prompt tokens per finished request.",
                                              token_buckets())),
      generation_tokens_hist_(registry_.histogram("horizon_request_generation_tokens",
                                                  "Generated tokens per finished request.", token_buckets())),
      max_tokens_hist_(registry_.histogram("horizon_request_max_tokens",
                                           "Output token limit (max_tokens) per finished request.", token_buckets())),
      prompt_tokens_(registry_.counter("horizon_request_prompt_tokens_total", "Prompt tokens of finished requests.")),
      completion_tokens_(registry_.counter("horizon_request_generation_tokens_total",
                                           "Completion tokens of finished requests.")),
      finish_counts_(registry_.labeled_counter("horizon_requests_finished_total",
                                               "Finished generation requests by finish reason.", "finish_reason")),
      http_status_counts_(registry_.labeled_counter("horizon_http_requests_total",
                                                    "HTTP requests answered, by status code.", "status")),
      rate_limited_(registry_.counter("horizon_requests_rate_limited_total",
                                      "Generation requests refused (429) for being over the per-client rate limit.")) {}

void ServerMetrics::on_http_status(int status) { http_status_counts_.inc(std::to_string(status)); }

void ServerMetrics::on_request_finished(const GenerationEvent& e, double e2e_seconds) {
  const auto prompt = static_cast<uint64_t>(std::max(e.prompt_tokens, 0));
  const auto completion = static_cast<uint64_t>(std::max(e.completion_tokens, 0));
  e2e_.observe(e2e_seconds);
  finish_counts_.inc(finish_reason_name(e.finish_reason));
  prompt_tokens_.inc(prompt);
  completion_tokens_.inc(completion);
  prompt_tokens_hist_.observe(static_cast<double>(prompt));
  generation_tokens_hist_.observe(static_cast<double>(completion));
  if (e.max_tokens > 0) max_tokens_hist_.observe(e.max_tokens);
  if (e.ran) {
    queue_time_.observe(e.queue_seconds);
    prefill_time_.observe(e.prefill_seconds);
    decode_time_.observe(e.decode_seconds);
    inference_time_.observe(e.prefill_seconds + e.decode_seconds);
  }
}

void ServerMetrics::on_request_finished(FinishReason reason, int32_t prompt_tokens, int32_t completion_tokens,
                                        double e2e_seconds) {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kFinished;
  e.finish_reason = reason;
  e.prompt_tokens = prompt_tokens;
  e.completion_tokens = completion_tokens;
  on_request_finished(e, e2e_seconds);
}

stats::Snapshot ServerMetrics::snapshot(const EngineStats& stats) const {
  stats::Snapshot out;
  stats.collect(out);
  registry_.collect(out);
  if (options_.vllm_names) add_vllm_names(out);
  if (!options_.model_name.empty()) out.label_all("model_name", options_.model_name);
  return out;
}

std::string ServerMetrics::render(const EngineStats& stats) const { return render_prometheus(snapshot(stats)); }

std::string ServerMetrics::render_json(const EngineStats& stats) const {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return hz::render_json(snapshot(stats), std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

}  // namespace hz
