// `horizon serve` on stories260K.gguf driven by the official openai client: results equal
// `horizon run`, 16 concurrent streams are each bit-identical to their single-request output and
// share engine steps, disconnecting clients free their KV blocks, SIGTERM drains and exits 0.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::string model() { return test::model_path("stories260K.gguf"); }
std::string script() { return std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/openai_real.mjs"; }

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

nlohmann::json node(const test::ServerProcess& srv, const std::string& args) {
  std::string out, err;
  int rc = test::run_command("node " + script() + " " + srv.base_url() + " " + args, &out, &err);
  EXPECT_EQ(rc, 0) << err;
  if (rc != 0) return {};
  return nlohmann::json::parse(out);
}

std::string run_greedy(const std::string& prompt, int n) {
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " run -m " + model() + " --temp 0 -n " + std::to_string(n) +
                                 " -p " + shell_quote(prompt),
                             &out, &err);
  EXPECT_EQ(rc, 0) << err;
  if (!out.empty() && out.back() == '\n') out.pop_back();  // run ends the output with a newline
  return out;
}

int64_t metric(const test::ServerProcess& srv, const std::string& name) {
  std::string body;
  test::http_request("GET", srv.base_url() + "/metrics", "", &body);
  std::smatch m;
  std::regex re("\n" + name + "(\\{model_name=\"[^\"]*\"\\})? ([0-9.e+]+)");
  if (!std::regex_search(body, m, re)) return -1;
  return static_cast<int64_t>(std::stod(m[2]));
}

class ServerE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    srv_ = std::make_unique<test::ServerProcess>(
        std::vector<std::string>{"-m", model(), "--threads", "2", "--max-num-seqs", "16", "--prefill-chunk", "8"});
    ASSERT_TRUE(srv_->ok()) << srv_->log();
  }
  std::unique_ptr<test::ServerProcess> srv_;
};

TEST_F(ServerE2ETest, OpenAIClientGreedyEqualsHorizonRun) {
  const std::string prompt = "Once upon a time";
  nlohmann::json r = node(*srv_, "basic " + shell_quote(prompt) + " 40");
  std::string expected = run_greedy(prompt, 40);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(r["completion"]["text"], expected);
  EXPECT_EQ(r["completion"]["finish"], "length");
  EXPECT_EQ(r["completion"]["usage"]["completion_tokens"], 40);
  EXPECT_EQ(r["completion"]["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(r["completion"]["model"], "stories260K.gguf");
  EXPECT_EQ(r["completion_stream"]["text"], expected);
  EXPECT_EQ(r["completion_stream"]["finish"], "length");
  EXPECT_EQ(r["completion_stream"]["usage"]["completion_tokens"], 40);
  // Chat: the default template wraps the message; greedy stream and non-stream agree.
  EXPECT_FALSE(r["chat"]["text"].get<std::string>().empty());
  EXPECT_EQ(r["chat"]["text"], r["chat_stream"]["text"]);
}

// `n` sampled choices through the openai client: choice i is the request with seed + i on its own,
// streamed or not, and the choices differ (temperature 1).
TEST_F(ServerE2ETest, SeveralChoicesEachEqualTheirSeedAlone) {
  nlohmann::json r = node(*srv_, "choices 'Once upon a time' 24 3 7");
  ASSERT_EQ(r["choices"].size(), 3u) << r.dump();
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["text"], r["single"][i]) << i;
    EXPECT_EQ(r["streamed"][i], r["single"][i]) << i;
    distinct.insert(r["single"][i].get<std::string>());
  }
  EXPECT_GT(distinct.size(), 1u) << r.dump();
  EXPECT_EQ(r["usage"]["prompt_tokens"], 5);
  // Summed over the choices: 24 for each cut by max_tokens, at least 1 for any other.
  int64_t at_least = 0;
  for (const auto& c : r["choices"]) at_least += c["finish"] == "length" ? 24 : 1;
  EXPECT_GE(r["usage"]["completion_tokens"].get<int64_t>(), at_least);
  EXPECT_LE(r["usage"]["completion_tokens"].get<int64_t>(), 72);
}

// A batch of prompts through the openai client (as lm-eval-harness sends them): prompt p's choice i
// at index p * n + i equals prompt p sent alone, streamed or not; the prompts count once each.
TEST_F(ServerE2ETest, BatchedPromptsEachEqualTheirPromptAlone) {
  nlohmann::json r = node(*srv_, "batch 16 2 11 'Once upon a time' 'The little dog' 'Lily and Ben'");
  ASSERT_EQ(r["choices"].size(), 6u) << r.dump();
  ASSERT_EQ(r["alone"].size(), 6u) << r.dump();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["text"], r["alone"][i]) << i;
    EXPECT_EQ(r["streamed"][i], r["alone"][i]) << i;
  }
  EXPECT_NE(r["alone"][0], r["alone"][2]);
  EXPECT_EQ(r["usage"]["prompt_tokens"], r["alone_prompt_tokens"]);
  EXPECT_EQ(r["streamed_usage"]["prompt_tokens"], r["alone_prompt_tokens"]);
  EXPECT_EQ(r["streamed_usage"]["completion_tokens"], r["usage"]["completion_tokens"]);
}

// Scoring prompts as lm-eval-harness does (echo, logprobs, one token) through the openai client:
// the echoed text is the prompt, the first token has no logprob, every prompt token has one, the
// generated token's equals the plain request's, and a batch gives each prompt's values alone.
TEST_F(ServerE2ETest, EchoScoresPromptsAsInABatchAsAlone) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran to the park"};
  nlohmann::json r = node(*srv_, "score " + shell_quote(prompts[0]) + " " + shell_quote(prompts[1]));
  ASSERT_EQ(r["batch"].size(), 2u) << r.dump();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(prompts[i]);
    const nlohmann::json& b = r["batch"][i];
    EXPECT_EQ(b, r["alone"][i]);
    const nlohmann::json& plain = r["plain"][i];
    EXPECT_EQ(b["text"], prompts[i] + plain["text"].get<std::string>());
    const nlohmann::json& lp = b["logprobs"];
    const size_t n = lp["tokens"].size();
    ASSERT_GE(n, 3u);
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    for (size_t t = 1; t < n; ++t) {
      ASSERT_TRUE(lp["token_logprobs"][t].is_number()) << t;
      EXPECT_LE(lp["token_logprobs"][t].get<double>(), 0.0) << t;
      EXPECT_EQ(lp["top_logprobs"][t].size(), 1u) << t;
    }
    EXPECT_EQ(lp["token_logprobs"][n - 1], plain["logprobs"]["token_logprobs"][0]);
    EXPECT_EQ(lp["tokens"][n - 1], plain["logprobs"]["tokens"][0]);
    EXPECT_EQ(lp["text_offset"][n - 1], prompts[i].size());
  }
}

TEST_F(ServerE2ETest, SixteenConcurrentStreamsMatchTheirSingleRuns) {
  const std::vector<std::string> seeds = {"Once upon a time", "The little dog", "Lily and Ben", "One day",
                                          "The sun was", "Tom had a", "A big bird", "The cat"};
  std::vector<std::string> prompts;
  for (int i = 0; i < 16; ++i) prompts.push_back(seeds[i % seeds.size()] + (i >= 8 ? " and" : ""));
  std::string args = "concurrent 48";
  for (const auto& p : prompts) args += " " + shell_quote(p);
  nlohmann::json r = node(*srv_, args);
  ASSERT_EQ(r["results"].size(), 16u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(r["results"][i]["text"], run_greedy(prompts[i], 48)) << prompts[i];
  }
  EXPECT_GT(metric(*srv_, "horizon_max_seqs_in_step"), 1);  // the batch really was shared
}

TEST_F(ServerE2ETest, DisconnectingClientsFreeTheirBlocks) {
  std::string args = "disconnect 3";
  for (int i = 0; i < 6; ++i) args += " " + shell_quote("Once upon a time " + std::to_string(i));
  nlohmann::json r = node(*srv_, args);
  ASSERT_EQ(r["aborted"].size(), 6u);
  int64_t used = -1;
  for (int i = 0; i < 100; ++i) {
    used = metric(*srv_, "horizon_kv_blocks_used");
    if (used == 0 && metric(*srv_, "horizon_requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(used, 0);
  EXPECT_EQ(metric(*srv_, "horizon_kv_blocks_free"), metric(*srv_, "horizon_kv_blocks_total"));
  // Still serving.
  std::string body;
  EXPECT_EQ(test::http_request("POST", srv_->base_url() + "/v1/completions",
                               R"({"prompt":"Once upon a time","max_tokens":5,"temperature":0})", &body),
            200)
      << body;
}

TEST_F(ServerE2ETest, SigtermDrainsAndExitsZero) {
  std::string body;
  ASSERT_EQ(test::http_request("GET", srv_->base_url() + "/ready", "", &body), 200);
  EXPECT_EQ(srv_->terminate(), 0) << srv_->log();
}

}  // namespace
}  // namespace hz
