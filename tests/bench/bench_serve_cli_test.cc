// `horizon bench serve` against a real `horizon serve` on stories260K, started by the test: the
// report's counts add up, percentiles are ordered, throughput and peak RSS are positive; and
// clear errors for bad flags or an unreachable server.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

std::string bin() { return HORIZON_BINARY; }

// `horizon serve ... --port 0` as a child; the port is read from its log.
class ServeChild {
 public:
  explicit ServeChild(std::vector<std::string> args) {
    log_ = test::make_temp_dir("bench_serve") + "/server.log";
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      if (f != nullptr) {
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
      }
      std::vector<std::string> a = {bin(), "serve"};
      a.insert(a.end(), args.begin(), args.end());
      a.insert(a.end(), {"--port", "0"});
      std::vector<char*> argv;
      for (auto& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const std::regex addr(R"(on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::smatch m;
      std::string l = log();
      if (std::regex_search(l, m, addr)) port_ = std::stoi(m[1]);
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~ServeChild() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

void expect_ordered(const json& l, const std::string& what) {
  ASSERT_TRUE(l.is_object()) << what;
  EXPECT_GT(l["count"].get<int64_t>(), 0) << what;
  // Inter-token gaps can be 0 ms: chunks that arrive in one read get one timestamp.
  if (what != "itl_ms") {
    EXPECT_GT(l["p50"].get<double>(), 0) << what;
  }
  EXPECT_GE(l["min"].get<double>(), 0) << what;
  EXPECT_LE(l["min"].get<double>(), l["p50"].get<double>()) << what;
  EXPECT_LE(l["p50"].get<double>(), l["p95"].get<double>()) << what;
  EXPECT_LE(l["p95"].get<double>(), l["p99"].get<double>()) << what;
  EXPECT_LE(l["p99"].get<double>(), l["max"].get<double>()) << what;
}

TEST(BenchServeCliTest, DrivesARealServer) {
  ServeChild server({"-m", test::model_path("stories260K.gguf"), "-t", "1", "--disable-log-requests"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  std::string out, err;
  int rc = test::run_command(bin() + " bench serve --url " + url +
                                 " -c 3 --requests 7 --input-tokens 12 --output-tokens 5 --json --pid " +
                                 std::to_string(server.pid()),
                             &out, &err);
  ASSERT_EQ(rc, 0) << err << "\n" << server.log();
  json r = json::parse(out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << out;
  EXPECT_EQ(r["mode"], "serve");
  EXPECT_EQ(r["requests"], 7);
  EXPECT_EQ(r["completed"].get<int64_t>() + r["rejected"].get<int64_t>() + r["errors"].get<int64_t>(), 7);
  EXPECT_EQ(r["rejected"], 0);
  EXPECT_EQ(r["errors"], 0) << r["error_samples"].dump();
  EXPECT_EQ(r["error_rate"], 0.0);
  EXPECT_EQ(r["output_tokens"], 7 * 5);  // ignore_eos: every request gives max_tokens
  EXPECT_DOUBLE_EQ(r["mean_output_tokens"].get<double>(), 5.0);
  EXPECT_GT(r["mean_prompt_tokens"].get<double>(), 12.0);  // words -> at least as many tokens here
  EXPECT_GT(r["output_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(r["request_throughput_per_s"].get<double>(), 0);
  EXPECT_GT(r["server_peak_rss_bytes"].get<double>(), 1e6);
  for (const char* k : {"ttft_ms", "tpot_ms", "e2e_latency_ms", "itl_ms"}) expect_ordered(r[k], k);
  EXPECT_EQ(r["ttft_ms"]["count"], 7);
  EXPECT_LE(r["ttft_ms"]["p50"].get<double>(), r["e2e_latency_ms"]["p50"].get<double>());
  const json& c = r["conditions"];
  for (const char* k : {"cpu_model", "num_cpus", "ram_bytes", "git_hash", "concurrency", "output_tokens", "model"}) {
    EXPECT_TRUE(c.contains(k)) << k;
  }
  EXPECT_EQ(c["concurrency"], 3);
  EXPECT_EQ(c["model"], "stories260K.gguf") << c.dump();

  // The table form, by duration.
  rc = test::run_command(bin() + " bench serve --url " + url + " -c 2 --duration 0.5 --input-tokens 4 --output-tokens 2",
                         &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("ttft_ms"), std::string::npos) << out;
  EXPECT_NE(out.find("errors 0"), std::string::npos) << out;

  // Every request refused (prompts beyond the 512-token context): the server's reason is shown and
  // the run fails.
  rc = test::run_command(bin() + " bench serve --url " + url + " -c 1 --requests 2 --input-tokens 2000 --output-tokens 2",
                         &out, &err);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("error: HTTP 400: "), std::string::npos) << out;
  EXPECT_NE(out.find("512"), std::string::npos) << out;
  EXPECT_NE(err.find("no request completed"), std::string::npos) << err;
}

TEST(BenchServeCliTest, PoissonArrivalsCountRefusalsApartAndPlot) {
  // One sequence at a time and one waiting: a burst of requests is mostly refused with 429.
  ServeChild server({"-m", test::model_path("stories260K.gguf"), "-t", "1", "--disable-log-requests", "--max-num-seqs",
                     "1", "--max-queue", "1"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const std::string dir = test::make_temp_dir("bench_serve_plot");
  std::string out, err;
  int rc = test::run_command(bin() + " bench serve --url " + url +
                                 " -c 8 --request-rate 2000 --requests 12 --input-tokens 8 --output-tokens 100 --json"
                                 " --svg " + dir + "/serve.svg",
                             &out, &err);
  ASSERT_EQ(rc, 0) << err << "\n" << server.log();
  json r = json::parse(out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << out;
  EXPECT_EQ(r["requests"], 12);
  EXPECT_EQ(r["completed"].get<int64_t>() + r["rejected"].get<int64_t>(), 12) << out;
  EXPECT_GT(r["completed"].get<int64_t>(), 0) << out;
  EXPECT_GT(r["rejected"].get<int64_t>(), 0) << out;
  EXPECT_EQ(r["errors"], 0) << r["error_samples"].dump();  // a 429 is not an error
  EXPECT_TRUE(r["error_samples"].empty());
  EXPECT_EQ(r["conditions"]["arrivals"], "poisson");
  EXPECT_EQ(r["conditions"]["request_rate"], 2000.0);
  EXPECT_FALSE(r.contains("timeline"));
  std::ifstream in(dir + "/serve.svg");
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_NE(svg.str().find("horizon bench serve: stories260K.gguf"), std::string::npos);
  EXPECT_NE(svg.str().find(">latency of each request</text>"), std::string::npos);
  EXPECT_NE(svg.str().find(">refused (429)</text>"), std::string::npos);

  // The table names refusals apart from errors.
  rc = test::run_command(bin() + " bench serve --url " + url + " -c 2 --request-rate 50 --requests 3 --output-tokens 2",
                         &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("50 requests/s (Poisson arrivals)"), std::string::npos) << out;
  EXPECT_NE(out.find("refused with 429"), std::string::npos) << out;

  rc = test::run_command(bin() + " bench serve --url " + url + " --request-rate -1 --requests 1", &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--request-rate"), std::string::npos) << err;
}

TEST(BenchServeCliTest, UnreachableServerAndBadFlags) {
  struct Case {
    std::string args;
    const char* expect;
  };
  // Port 1 on loopback: nothing listens there.
  std::vector<Case> cases = {
      {"--url http://127.0.0.1:1 --requests 1", "connect"},
      {"--url https://example.com --requests 1", "--url"},
      {"--url http://127.0.0.1:1 -c 0 --requests 1", "-c"},
      {"--url http://127.0.0.1:1 --requests 1 --output-tokens 0", "--output-tokens"},
      {"--url http://127.0.0.1:1 --requests 1 --prompt-file /nonexistent.txt", "--prompt-file"},
      {"--url http://127.0.0.1:1 --requests 1 --pid 999999999", "--pid"},
  };
  for (const auto& c : cases) {
    std::string out, err;
    int rc = test::run_command(bin() + " bench serve " + c.args, &out, &err);
    EXPECT_NE(rc, 0) << c.args;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.args << ": " << err;
  }
}

}  // namespace
}  // namespace hz
