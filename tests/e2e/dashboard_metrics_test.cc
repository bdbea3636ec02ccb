// The dashboards read what a running server serves: every metric deploy/grafana/horizon.json
// queries is on /metrics (with the KV disk and far tiers on), and under --metrics-compat vllm every
// name vLLM's published dashboard queries is there too, labelled by model_name as vLLM's are.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Sample name -> the label text of each of its series ("" for none), from Prometheus text.
std::map<std::string, std::vector<std::string>> samples(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t end = line.find_first_of("{ ");
    const std::string name = line.substr(0, end);
    std::string labels;
    if (end != std::string::npos && line[end] == '{') labels = line.substr(end, line.find('}', end) - end + 1);
    out[name].push_back(labels);
  }
  return out;
}

// Every expr of every panel of a Grafana dashboard.
std::vector<std::string> dashboard_exprs(const std::string& path) {
  const nlohmann::json d = nlohmann::json::parse(read_all(path));
  std::vector<std::string> exprs;
  for (const auto& panel : d.at("panels")) {
    for (const auto& t : panel.value("targets", nlohmann::json::array())) exprs.push_back(t.at("expr"));
  }
  return exprs;
}

class DashboardMetricsTest : public ::testing::Test {
 protected:
  // One server for the suite: KV disk and far tiers on, vLLM's names on, one request answered (so
  // labelled families such as finish reasons have a series).
  static void SetUpTestSuite() {
    dir_ = new std::string(test::make_temp_dir("dashboard"));
    srv_ = new test::ServerProcess({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--kv-budget", "64MiB",
                                    "--kv-disk-dir", *dir_ + "/kv", "--served-model-name", "m", "--metrics-compat",
                                    "vllm"});
    if (!srv_->ok()) return;
    std::string body;
    test::http_request("POST", srv_->base_url() + "/v1/completions",
                       R"({"model":"m","prompt":"Once upon a time","max_tokens":4})", &body);
    test::http_request("GET", srv_->base_url() + "/metrics", "", &body);
    metrics_ = new std::string(body);
  }
  static void TearDownTestSuite() {
    delete srv_;
    delete metrics_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_TRUE(srv_->ok()) << srv_->log();
    ASSERT_NE(metrics_, nullptr);
  }
  static inline test::ServerProcess* srv_ = nullptr;
  static inline std::string* metrics_ = nullptr;
  static inline std::string* dir_ = nullptr;
};

TEST_F(DashboardMetricsTest, HorizonDashboardQueriesOnlyMetricsTheServerHas) {
  const auto have = samples(*metrics_);
  const std::regex name_re("horizon_[a-z0-9_]+");
  std::set<std::string> queried;
  for (const std::string& e : dashboard_exprs(std::string(HORIZON_SOURCE_DIR) + "/deploy/grafana/horizon.json")) {
    EXPECT_NE(e.find("model_name=\"$model_name\""), std::string::npos) << "not filtered by model: " << e;
    for (std::sregex_iterator it(e.begin(), e.end(), name_re), end; it != end; ++it) queried.insert(it->str());
  }
  ASSERT_GT(queried.size(), 30u);
  for (const std::string& name : queried) EXPECT_TRUE(have.count(name) != 0) << name << " is not on /metrics";
  // Tiers included: the dashboard shows the disk and far tiers' own figures.
  EXPECT_TRUE(queried.count("horizon_kv_disk_promotions_total") && queried.count("horizon_kv_far_blocks"));
  // Every horizon series carries the served model's name, as the dashboard's filter expects.
  for (const auto& [name, series] : have) {
    for (const std::string& labels : series) {
      EXPECT_EQ(labels.rfind("{model_name=\"m\"", 0), 0u) << name << labels;
    }
  }
}

TEST_F(DashboardMetricsTest, EveryNameVllmsDashboardQueriesIsThereUnderCompat) {
  const auto have = samples(*metrics_);
  std::istringstream names(read_all(std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/vllm_dashboard_metrics.txt"));
  std::string name;
  int checked = 0;
  while (std::getline(names, name)) {
    if (name.empty() || name[0] == '#') continue;
    ++checked;
    auto it = have.find(name);
    ASSERT_NE(it, have.end()) << name << " is not on /metrics under --metrics-compat vllm";
    for (const std::string& labels : it->second) EXPECT_EQ(labels.rfind("{model_name=\"m\"", 0), 0u) << name << labels;
  }
  EXPECT_EQ(checked, 24);
  // The same figures under both names: one request of 4 tokens finished by length.
  EXPECT_NE(metrics_->find("vllm:request_success_total{model_name=\"m\",finished_reason=\"length\"} 1\n"),
            std::string::npos) << *metrics_;
  EXPECT_NE(metrics_->find("vllm:generation_tokens_total{model_name=\"m\"} 4\n"), std::string::npos) << *metrics_;
  EXPECT_NE(metrics_->find("horizon_generation_tokens_total{model_name=\"m\"} 4\n"), std::string::npos) << *metrics_;
  EXPECT_NE(metrics_->find("vllm:request_prefill_time_seconds_count{model_name=\"m\"} 1\n"), std::string::npos)
      << *metrics_;
}

}  // namespace
}  // namespace hz
