// Replicas sharing KV prefixes through a real redis-server, behind a real nginx (deploy/nginx), all
// on loopback ports (synth-tiny-f16, native context 131072): replica B serves a ~2,000-token prompt
// that replica A computed with cached_tokens >= 1,984 and the same greedy tokens and top-5
// logprobs, bit for bit; nginx spreads streaming requests over both; records corrupted in Redis are
// recomputed; Redis killed, and frozen, under 2 replicas x 8 streaming clients: no request fails,
// and hits resume once Redis is back. The systemd unit of deploy/ passes systemd-analyze verify.
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/server_process.h"
#include "support/service_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const char* kSecret = "replicas-share-this-secret-0123456789";

#define REQUIRE_SERVICE(srv)                                  \
  do {                                                        \
    if (!(srv).ok()) {                                        \
      if (test::services_required()) FAIL() << (srv).error(); \
      GTEST_SKIP() << (srv).error();                          \
    }                                                         \
  } while (0)

// Deterministic prose of `words` words (about 2.8 tokens per word with this tokenizer).
std::string prose(int words, uint32_t seed) {
  static const char* kWords[] = {"the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far", "away", "house", "tree",
                                 "big", "small", "red", "blue", "green", "quick", "lazy", "fox", "jumps", "over",
                                 "under", "river", "mountain", "sky", "bright", "dark", "night", "day"};
  std::mt19937 rng(seed);
  std::string text;
  for (int i = 0; i < words; ++i) {
    if (i > 0) text += ' ';
    text += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return text;
}

std::vector<std::string> replica_args(const std::string& redis_url) {
  return {"-m", test::model_path("synth-tiny-f16.gguf"), "--threads", "1", "--max-model-len", "8192", "--kv-budget",
          "64MiB", "--max-num-seqs", "8", "--kv-remote", redis_url, "--kv-remote-secret", kSecret};
}

double metric(const std::string& base_url, const std::string& name) {
  std::string body;
  test::http_request("GET", base_url + "/metrics", "", &body);
  std::smatch m;
  // Unlabelled, or labelled by model (model_name="...").
  if (!std::regex_search(body, m, std::regex("\n" + name + "(\\{[^}]*\\})? ([0-9.e+-]+)"))) return -1;
  return std::stod(m[2]);
}

bool wait_for(const std::function<bool()>& f, std::chrono::milliseconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return f();
}

struct Completion {
  int status = 0;
  json body;
  int64_t prompt_tokens = -1, cached_tokens = -1;
  std::string text;
  std::string logprobs;  // the logprobs object, serialized (floats print exactly when equal)
};

Completion complete(const std::string& base_url, const std::string& prompt, int max_tokens = 6) {
  json req = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"logprobs", 5}, {"ignore_eos", true}};
  std::string body;
  Completion c;
  c.status = test::http_request("POST", base_url + "/v1/completions", req.dump(), &body);
  c.body = json::parse(body, nullptr, false);
  if (c.status != 200 || c.body.is_discarded()) return c;
  c.prompt_tokens = c.body["usage"]["prompt_tokens"].get<int64_t>();
  c.cached_tokens = c.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  c.text = c.body["choices"][0]["text"].get<std::string>();
  c.logprobs = c.body["choices"][0]["logprobs"].dump();
  return c;
}

// A streaming request: true when it ended with [DONE] and carried no error.
bool stream_ok(const std::string& base_url, const std::string& prompt, int max_tokens, std::string* why) {
  json req = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", true}};
  std::string body;
  const int status = test::http_request("POST", base_url + "/v1/completions", req.dump(), &body);
  const bool ok = status == 200 && body.find("data: [DONE]") != std::string::npos && body.find("\"error\"") == std::string::npos;
  if (!ok && why != nullptr) *why = "HTTP " + std::to_string(status) + ": " + body.substr(0, 300);
  return ok;
}

// Blocks of `prompt_tokens` a replica writes behind after serving it (its full prompt blocks).
double full_blocks(int64_t prompt_tokens) { return static_cast<double>((prompt_tokens - 1) / 16); }

TEST(KvRemoteTest, SecondReplicaServesTheFirstsPrefixBitIdentical) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  test::ServerProcess a(replica_args(redis.url())), b(replica_args(redis.url()));
  ASSERT_TRUE(a.ok()) << a.log();
  ASSERT_TRUE(b.ok()) << b.log();
  const std::string prompt = prose(760, 1);

  const Completion cold = complete(a.base_url(), prompt);
  ASSERT_EQ(cold.status, 200) << cold.body.dump();
  ASSERT_GE(cold.prompt_tokens, 2000);
  EXPECT_EQ(cold.cached_tokens, 0);
  // A writes its blocks behind; B then finds them in Redis.
  ASSERT_TRUE(wait_for([&] { return metric(a.base_url(), "horizon_kv_remote_writes_total") >= full_blocks(cold.prompt_tokens); }))
      << a.log();
  const Completion warm = complete(b.base_url(), prompt);
  ASSERT_EQ(warm.status, 200) << warm.body.dump();
  EXPECT_GE(warm.cached_tokens, 1984);
  EXPECT_EQ(warm.text, cold.text);
  EXPECT_EQ(warm.logprobs, cold.logprobs);  // greedy tokens and top-5 logprobs, bit for bit
  EXPECT_GE(metric(b.base_url(), "horizon_kv_remote_hits_total"), 124);
  EXPECT_EQ(metric(b.base_url(), "horizon_kv_remote_corrupt_total"), 0);
  EXPECT_EQ(metric(b.base_url(), "horizon_kv_remote_degraded"), 0);

  // Every record overwritten in Redis (one byte each, with redis-cli): replica B's restarted twin
  // (no RAM copy) detects it, recomputes, and answers the same.
  const std::string keys = redis.cli("--scan --pattern 'hz:kv:*'");
  int n = 0;
  for (size_t p = 0; p < keys.size();) {
    size_t e = keys.find('\n', p);
    if (e == std::string::npos) e = keys.size();
    const std::string k = keys.substr(p, e - p);
    if (!k.empty()) {
      redis.cli("SETRANGE " + k + " 300 Z");
      ++n;
    }
    p = e + 1;
  }
  EXPECT_GE(n, 124);
  test::ServerProcess c(replica_args(redis.url()));
  ASSERT_TRUE(c.ok()) << c.log();
  const Completion again = complete(c.base_url(), prompt);
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.cached_tokens, 0);
  EXPECT_EQ(again.text, cold.text);
  EXPECT_EQ(again.logprobs, cold.logprobs);
  EXPECT_GE(metric(c.base_url(), "horizon_kv_remote_corrupt_total"), 1);

  // A replica of another model (other weights: another fingerprint) never gets these blocks.
  std::vector<std::string> other = replica_args(redis.url());
  other[1] = test::model_path("synth-tiny-q8_0.gguf");
  test::ServerProcess d(other);
  ASSERT_TRUE(d.ok()) << d.log();
  ASSERT_TRUE(wait_for([&] { return metric(c.base_url(), "horizon_kv_remote_writes_total") >= full_blocks(again.prompt_tokens); }));
  const Completion foreign = complete(d.base_url(), prompt);
  ASSERT_EQ(foreign.status, 200);
  EXPECT_EQ(foreign.cached_tokens, 0);
  EXPECT_EQ(metric(d.base_url(), "horizon_kv_remote_hits_total"), 0);
}

TEST(KvRemoteTest, NginxSpreadsStreamingRequestsOverTheReplicas) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  test::ServerProcess a(replica_args(redis.url())), b(replica_args(redis.url()));
  ASSERT_TRUE(a.ok()) << a.log();
  ASSERT_TRUE(b.ok()) << b.log();
  test::NginxServer nginx(std::string(HORIZON_SOURCE_DIR) + "/deploy/nginx/horizon.conf", {a.port(), b.port()});
  REQUIRE_SERVICE(nginx);
  std::string body;
  EXPECT_EQ(test::http_request("GET", nginx.base_url() + "/health", "", &body), 200) << body;
  EXPECT_EQ(test::http_request("GET", nginx.base_url() + "/ready", "", &body), 200) << body;
  std::atomic<int> failed{0};
  std::string why;
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      std::string w;
      if (!stream_ok(nginx.base_url(), prose(60, 100 + i), 24, &w)) {
        ++failed;
        why = w;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0) << why;
  // least_conn with 8 concurrent streams: both replicas served some.
  EXPECT_GT(metric(a.base_url(), "horizon_prompt_tokens_total"), 0);
  EXPECT_GT(metric(b.base_url(), "horizon_prompt_tokens_total"), 0);
}

// 2 replicas x 8 streaming clients; `fault` runs in the middle. Every request must succeed. Then a new prefix computed by A is a remote hit on B.
void run_under_load(test::RedisServer& redis, const std::function<void()>& fault, const std::function<void()>& heal) {
  test::ServerProcess a(replica_args(redis.url())), b(replica_args(redis.url()));
  ASSERT_TRUE(a.ok()) << a.log();
  ASSERT_TRUE(b.ok()) << b.log();
  std::atomic<bool> stop{false};
  std::atomic<int> done{0}, failed{0};
  std::mutex mu;
  std::string why;
  std::vector<std::thread> clients;
  // Each client sends a new ~400-token prompt to A, then the same to B: B's prefix comes from
  // Redis (while it works), and every request streams.
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      for (int k = 0; !stop.load(); ++k) {
        const std::string prompt = prose(150, 1000 * i + k);
        for (const test::ServerProcess* r : {&a, &b}) {
          std::string w;
          if (stream_ok(r->base_url(), prompt, 4, &w)) {
            ++done;
          } else {
            ++failed;
            std::lock_guard<std::mutex> lk(mu);
            why = w;
          }
        }
      }
    });
  }
  // ~13 s in all by default; HORIZON_KV_REMOTE_LOAD_S=60 for the long version (a soak).
  const char* env = std::getenv("HORIZON_KV_REMOTE_LOAD_S");
  const double total = env != nullptr ? std::max(6.0, std::atof(env)) : 13.0;
  const auto phase = std::chrono::duration<double>(total / 3);
  std::this_thread::sleep_for(phase);
  fault();
  std::this_thread::sleep_for(phase);
  heal();
  std::this_thread::sleep_for(phase);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0) << why;
  EXPECT_GT(done.load(), 16);
  std::printf("streaming requests: %d done, %d failed; remote hits A %.0f B %.0f, errors A %.0f B %.0f\n", done.load(),
              failed.load(), metric(a.base_url(), "horizon_kv_remote_hits_total"),
              metric(b.base_url(), "horizon_kv_remote_hits_total"), metric(a.base_url(), "horizon_kv_remote_errors_total"),
              metric(b.base_url(), "horizon_kv_remote_errors_total"));
  EXPECT_GE(metric(a.base_url(), "horizon_kv_remote_errors_total") + metric(b.base_url(), "horizon_kv_remote_errors_total"), 1);
  // Back without a restart of horizon: a prefix A computes now is a remote hit on B.
  ASSERT_TRUE(wait_for([&] {
    return metric(a.base_url(), "horizon_kv_remote_degraded") == 0 && metric(b.base_url(), "horizon_kv_remote_degraded") == 0;
  })) << a.log();
  const double hits = metric(b.base_url(), "horizon_kv_remote_hits_total");
  const std::string fresh = prose(300, 99);
  const Completion first = complete(a.base_url(), fresh);
  ASSERT_EQ(first.status, 200);
  ASSERT_TRUE(wait_for([&] {
    return metric(a.base_url(), "horizon_kv_remote_queue_bytes") == 0 &&
           metric(a.base_url(), "horizon_kv_remote_writes_total") > 0;
  }));
  std::this_thread::sleep_for(200ms);
  const Completion second = complete(b.base_url(), fresh);
  ASSERT_EQ(second.status, 200);
  EXPECT_GE(second.cached_tokens, 16 * static_cast<int64_t>(full_blocks(first.prompt_tokens)) - 16);
  EXPECT_GT(metric(b.base_url(), "horizon_kv_remote_hits_total"), hits);
  EXPECT_EQ(second.logprobs, first.logprobs);
}

TEST(KvRemoteTest, RedisKilledUnderLoadFailsNoRequestAndHitsResume) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  run_under_load(redis, [&] { redis.kill_now(); }, [&] { ASSERT_TRUE(redis.restart()) << redis.error(); });
}

TEST(KvRemoteTest, RedisFrozenUnderLoadFailsNoRequestAndHitsResume) {
  test::RedisServer redis;
  REQUIRE_SERVICE(redis);
  run_under_load(redis, [&] { redis.freeze(); }, [&] { redis.thaw(); });
}

TEST(KvRemoteTest, SystemdUnitPassesVerify) {
  if (!test::missing_binary("systemd-analyze").empty()) {
    if (test::services_required()) FAIL() << "systemd-analyze is missing";
    GTEST_SKIP() << "systemd-analyze is not installed";
  }
  // The unit as shipped, with ExecStart pointing at this build's binary (verify checks it exists).
  const std::string dir = test::make_temp_dir("unit");
  std::ifstream in(std::string(HORIZON_SOURCE_DIR) + "/deploy/systemd/horizon@.service");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string unit = std::regex_replace(ss.str(), std::regex("/usr/local/bin/horizon"), HORIZON_BINARY);
  ASSERT_NE(unit.find(HORIZON_BINARY), std::string::npos);
  std::ofstream(dir + "/horizon@8001.service") << unit;
  std::string out, err;
  const int rc = test::run_command("systemd-analyze verify " + dir + "/horizon@8001.service", &out, &err);
  EXPECT_EQ(rc, 0) << out << err;
  EXPECT_EQ(err.find("horizon@"), std::string::npos) << err;  // no warning about the unit
}

}  // namespace
}  // namespace hz
