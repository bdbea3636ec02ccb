// The engine's statistics table and the generic renderers: /metrics text and its JSON twin carry
// the same families; tier sections appear only while the tier is on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "server/metrics.h"

namespace hz {
namespace {

using nlohmann::json;

std::set<std::string> prometheus_families(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::string name = line.substr(7, line.find(' ', 7) - 7);
    EXPECT_TRUE(names.insert(name).second) << "family rendered twice: " << name;
  }
  return names;
}

EngineStats disk_and_far_stats() {
  EngineStats s;
  s.kv_blocks_used = 3;
  s.kv_blocks_cached = 5;
  s.kv_disk_enabled = true;
  s.kv_disk_blocks = 11;
  s.kv_disk_read_seconds = 0.5;
  s.kv_disk_misses = 2;
  s.kv_far_enabled = true;
  s.kv_far_blocks = 13;
  return s;
}

TEST(EngineStatsTest, TierSectionsOnlyWhileEnabled) {
  stats::Snapshot off;
  EngineStats().collect(off);
  EXPECT_EQ(off.find("horizon_kv_disk_hits_total"), nullptr);
  EXPECT_EQ(off.find("horizon_kv_far_blocks"), nullptr);
  ASSERT_NE(off.find("horizon_kv_tier_blocks"), nullptr);
  EXPECT_EQ(off.find("horizon_kv_tier_blocks")->series.size(), 1u);  // ram only

  stats::Snapshot on;
  disk_and_far_stats().collect(on);
  EXPECT_NE(on.find("horizon_kv_disk_hits_total"), nullptr);
  EXPECT_NE(on.find("horizon_kv_far_blocks"), nullptr);
  EXPECT_EQ(on.find("horizon_kv_tier_blocks")->series.size(), 2u);
}

TEST(EngineStatsTest, KvBlocksByTier) {
  std::string text = ServerMetrics().render(disk_and_far_stats());
  for (const char* line : {"horizon_kv_blocks{tier=\"ram\"} 3\n", "horizon_kv_blocks{tier=\"prefix\"} 5\n",
                           "horizon_kv_blocks{tier=\"disk\"} 11\n", "horizon_kv_blocks{tier=\"far\"} 13\n",
                           "horizon_kv_tier_blocks{tier=\"ram\"} 8\n", "horizon_kv_disk_read_seconds_total 0.5\n",
                           "horizon_kv_disk_misses_total 2\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  EXPECT_EQ(ServerMetrics().render(EngineStats()).find("tier=\"far\""), std::string::npos);
}

TEST(MetricsJsonTest, TwinHasTheSameFamiliesAndValues) {
  ServerMetrics m;
  m.on_http_status(200);
  m.on_http_status(404);
  m.observe_ttft(0.003);
  m.on_request_finished(FinishReason::kLength, 4, 3, 0.2);
  EngineStats s = disk_and_far_stats();
  s.generation_tokens_total = 3;
  s.prefix_cache_queries = 4;
  s.prefix_cache_hits = 1;
  const std::string text = m.render(s);
  const json j = json::parse(m.render_json(s));
  EXPECT_GT(j["time_unix_ms"].get<int64_t>(), 0);
  const json& metrics = j["metrics"];
  std::set<std::string> keys;
  for (const auto& [k, v] : metrics.items()) keys.insert(k);
  EXPECT_EQ(keys, prometheus_families(text));

  EXPECT_EQ(metrics["horizon_generation_tokens_total"]["type"], "counter");
  EXPECT_EQ(metrics["horizon_generation_tokens_total"]["series"][0]["value"], 3);
  EXPECT_TRUE(metrics["horizon_generation_tokens_total"]["series"][0]["value"].is_number_integer());
  EXPECT_DOUBLE_EQ(metrics["horizon_prefix_cache_hit_rate"]["series"][0]["value"].get<double>(), 0.25);
  const json& tiers = metrics["horizon_kv_blocks"]["series"];
  ASSERT_EQ(tiers.size(), 4u);
  EXPECT_EQ(tiers[3]["labels"]["tier"], "far");
  EXPECT_EQ(tiers[3]["value"], 13);
  const json& status = metrics["horizon_http_requests_total"]["series"];
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[1]["labels"]["status"], "404");
  const json& ttft = metrics["horizon_time_to_first_token_seconds"];
  EXPECT_EQ(ttft["type"], "histogram");
  EXPECT_EQ(ttft["series"][0]["count"], 1);
  const json& buckets = ttft["series"][0]["buckets"];
  EXPECT_DOUBLE_EQ(buckets[0]["le"].get<double>(), 0.001);
  EXPECT_EQ(buckets[0]["count"], 0);
  EXPECT_EQ(buckets[1]["count"], 1);  // cumulative, le 0.005
  EXPECT_EQ(buckets.back()["count"], 1);
}

GenerationEvent finished_by_length() {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kFinished;
  e.finish_reason = FinishReason::kLength;
  e.prompt_tokens = 7;
  e.completion_tokens = 4;
  e.max_tokens = 16;
  e.ran = true;
  e.queue_seconds = 0.5;
  e.prefill_seconds = 0.25;
  e.decode_seconds = 1;
  return e;
}

TEST(MetricsRenderTest, RequestHistogramsAndKvUsage) {
  ServerMetrics m;
  m.on_request_finished(finished_by_length(), 2.0);
  GenerationEvent queued_only = finished_by_length();
  queued_only.ran = false;  // cancelled while waiting: no engine times
  m.on_request_finished(queued_only, 0.1);
  EngineStats s;
  s.kv_blocks_total = 8;
  s.kv_blocks_used = 2;
  s.kv_blocks_cached = 5;  // cached prefixes can be reused for other data: not "in use"
  const std::string text = m.render(s);
  for (const char* line : {"horizon_kv_cache_usage_perc 0.25\n", "horizon_request_queue_time_seconds_count 1\n",
                           "horizon_request_queue_time_seconds_sum 0.5\n", "horizon_request_prefill_time_seconds_sum 0.25\n",
                           "horizon_request_decode_time_seconds_sum 1\n", "horizon_request_inference_time_seconds_sum 1.25\n",
                           "horizon_request_prompt_tokens_bucket{le=\"5\"} 0\n",
                           "horizon_request_prompt_tokens_bucket{le=\"10\"} 2\n", "horizon_request_prompt_tokens_count 2\n",
                           "horizon_request_generation_tokens_sum 8\n", "horizon_request_max_tokens_sum 32\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  EXPECT_NE(ServerMetrics().render(EngineStats()).find("horizon_kv_cache_usage_perc 0\n"), std::string::npos);
  EXPECT_EQ(text.find("vllm:"), std::string::npos) << "vLLM's names only with --metrics-compat vllm";
  EXPECT_EQ(text.find("model_name"), std::string::npos) << "no label without a model name";
}

TEST(MetricsRenderTest, VllmNamesCarryTheSameFiguresLabelledByModel) {
  ServerMetrics m(MetricsOptions{"my-model", true});
  m.on_request_finished(finished_by_length(), 2.0);
  m.observe_ttft(0.003);
  EngineStats s;
  s.running = 3;
  s.waiting = 2;
  s.kv_blocks_total = 10;
  s.kv_blocks_used = 5;
  s.prompt_tokens_total = 7;
  s.generation_tokens_total = 4;
  s.preemptions_total = 1;
  const std::string text = m.render(s);
  prometheus_families(text);  // each family once
  for (const char* line :
       {"horizon_requests_running{model_name=\"my-model\"} 3\n", "vllm:num_requests_running{model_name=\"my-model\"} 3\n",
        "vllm:num_requests_waiting{model_name=\"my-model\"} 2\n", "vllm:num_requests_swapped{model_name=\"my-model\"} 0\n",
        "vllm:kv_cache_usage_perc{model_name=\"my-model\"} 0.5\n", "vllm:gpu_cache_usage_perc{model_name=\"my-model\"} 0.5\n",
        "vllm:cpu_cache_usage_perc{model_name=\"my-model\"} 0\n", "vllm:prompt_tokens_total{model_name=\"my-model\"} 7\n",
        "vllm:generation_tokens_total{model_name=\"my-model\"} 4\n", "vllm:num_preemptions_total{model_name=\"my-model\"} 1\n",
        "vllm:request_success_total{model_name=\"my-model\",finished_reason=\"length\"} 1\n",
        "vllm:time_to_first_token_seconds_bucket{model_name=\"my-model\",le=\"0.005\"} 1\n",
        "vllm:e2e_request_latency_seconds_sum{model_name=\"my-model\"} 2\n",
        "vllm:request_queue_time_seconds_sum{model_name=\"my-model\"} 0.5\n",
        "vllm:request_inference_time_seconds_sum{model_name=\"my-model\"} 1.25\n",
        "vllm:request_max_num_generation_tokens_sum{model_name=\"my-model\"} 16\n",
        "vllm:request_generation_tokens_count{model_name=\"my-model\"} 1\n",
        "# TYPE vllm:time_per_output_token_seconds histogram\n", "# TYPE vllm:inter_token_latency_seconds histogram\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  // The JSON twin carries the label as well.
  const json j = json::parse(m.render_json(s));
  EXPECT_EQ(j["metrics"]["vllm:num_requests_running"]["series"][0]["labels"]["model_name"], "my-model");
}

TEST(MetricsRenderTest, LabelValuesAreEscaped) {
  stats::Snapshot snap;
  snap.add("x", "h", stats::Kind::kGauge, {{"path", "a\"b\\c\nd"}}, int64_t{1});
  EXPECT_NE(render_prometheus(snap).find("x{path=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos)
      << render_prometheus(snap);
}

}  // namespace
}  // namespace hz
