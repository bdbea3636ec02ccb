// The KV disk tier across real process restarts on synth-tiny-f16 (native context 131072):
// `horizon run` on a ~4,000-token prompt, then a new process on the same store with the same
// prompt: the prefill is served from disk (its counters say so) and the generated tokens' log-
// probabilities (top 5 at every step, printed as hex floats) are bit-identical. A `horizon serve`
// killed with SIGKILL after a request leaves a store that the next process reopens and serves.
#include <signal.h>

#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::string model() { return test::model_path("synth-tiny-f16.gguf"); }

// Deterministic prose of `words` words (about 2.8 tokens per word with this tokenizer).
std::string write_prompt(const std::string& dir, int words, uint32_t seed) {
  static const char* kWords[] = {"the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far", "away", "house", "tree",
                                 "big", "small", "red", "blue", "green", "quick", "lazy", "fox", "jumps", "over",
                                 "under", "river", "mountain", "sky", "bright", "dark", "night", "day"};
  std::mt19937 rng(seed);
  std::string text;
  for (int i = 0; i < words; ++i) {
    if (i > 0) text += ' ';
    text += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  std::string path = dir + "/prompt-" + std::to_string(seed) + ".txt";
  std::ofstream(path) << text;
  return path;
}

struct RunResult {
  int rc = -1;
  std::string out;
  std::vector<std::string> logprobs;  // "logprob <id> <hex> <top5...>" lines
  long prompt_tokens = -1, cached = -1, promoted = -1, checksum_failures = -1;
  std::string err;
};

RunResult run(const std::string& prompt_file, const std::string& store) {
  RunResult r;
  std::string cmd = std::string(HORIZON_BINARY) + " run -m " + model() + " -f " + prompt_file +
                    " --temp 0 -n 4 --ignore-eos --print-logprobs -t 2 --kv-budget 64MiB --kv-disk-dir " + store +
                    " --kv-disk-budget 256MiB";
  r.rc = test::run_command(cmd, &r.out, &r.err);
  std::smatch m;
  std::string rest = r.err;
  std::regex lp("logprob [^\n]*");
  for (std::sregex_iterator it(r.err.begin(), r.err.end(), lp), end; it != end; ++it) r.logprobs.push_back(it->str());
  if (std::regex_search(r.err, m, std::regex("kv: cached ([0-9]+) of ([0-9]+) prompt tokens \\| disk: [0-9]+ blocks, ([0-9]+) promoted, [0-9]+ demoted, ([0-9]+) checksum"))) {
    r.cached = std::stol(m[1]);
    r.prompt_tokens = std::stol(m[2]);
    r.promoted = std::stol(m[3]);
    r.checksum_failures = std::stol(m[4]);
  }
  return r;
}

TEST(KvDiskRestart, SecondProcessPrefillsFromDiskBitIdentical) {
  const std::string dir = test::make_temp_dir("hz_kvrestart");
  const std::string prompt = write_prompt(dir, 1430, 1);
  const std::string store = dir + "/store";
  RunResult cold = run(prompt, store);
  ASSERT_EQ(cold.rc, 0) << cold.err;
  ASSERT_GE(cold.prompt_tokens, 3800) << cold.err;
  EXPECT_LE(cold.prompt_tokens, 4400) << cold.err;
  EXPECT_EQ(cold.cached, 0);
  EXPECT_EQ(cold.promoted, 0);
  ASSERT_EQ(cold.logprobs.size(), 4u) << cold.err;

  RunResult warm = run(prompt, store);
  ASSERT_EQ(warm.rc, 0) << warm.err;
  const long reusable = (cold.prompt_tokens - 1) / 16;  // full blocks before the last prompt token
  EXPECT_EQ(warm.promoted, reusable) << warm.err;
  EXPECT_EQ(warm.cached, reusable * 16) << warm.err;
  EXPECT_EQ(warm.checksum_failures, 0);
  EXPECT_EQ(warm.logprobs, cold.logprobs);  // bit-identical: hex floats compared as text
  EXPECT_EQ(warm.out, cold.out);
}

long disk_blocks(const test::ServerProcess& srv) {
  std::string body;
  test::http_request("GET", srv.base_url() + "/metrics", "", &body);
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("horizon_kv_tier_blocks\\{(model_name=\"[^\"]*\",)?tier=\"disk\"\\} ([0-9]+)"))) return -1;
  return std::stol(m[2]);
}

TEST(KvDiskRestart, StoreSurvivesSigkillOfTheServer) {
  const std::string dir = test::make_temp_dir("hz_kvrestart");
  const std::string prompt_file = write_prompt(dir, 360, 2);  // ~1,000 tokens
  const std::string store = dir + "/store";
  std::string prompt;
  {
    std::ifstream f(prompt_file);
    std::getline(f, prompt);
  }
  std::string text;
  {
    test::ServerProcess srv({"-m", model(), "--threads", "2", "--kv-budget", "64MiB", "--kv-disk-dir", store,
                             "--kv-disk-budget", "256MiB"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::string body;
    std::string req = std::string("{\"model\":\"m\",\"prompt\":\"") + prompt + "\",\"max_tokens\":4,\"temperature\":0}";
    ASSERT_EQ(test::http_request("POST", srv.base_url() + "/v1/completions", req, &body), 200) << body;
    // Written behind once the engine is idle; then the process dies without any shutdown.
    long blocks = -1;
    for (int i = 0; i < 200 && blocks < 50; ++i) {
      blocks = disk_blocks(srv);
      if (blocks < 50) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_GE(blocks, 50) << srv.log();
    ASSERT_EQ(::kill(srv.pid(), SIGKILL), 0);
    EXPECT_EQ(srv.terminate(10), 128 + SIGKILL);  // reaps it: died of the SIGKILL, no shutdown ran
  }
  RunResult after = run(prompt_file, store);
  ASSERT_EQ(after.rc, 0) << after.err;
  EXPECT_EQ(after.checksum_failures, 0) << after.err;
  EXPECT_EQ(after.promoted, (after.prompt_tokens - 1) / 16) << after.err;
}

}  // namespace
}  // namespace hz
