// Throughput of the HTTP layer alone (FakeEngine, no model): streamed requests per second and SSE
// chunks per second at concurrency 1, 4, 16, with client-side TTFT percentiles. Prints figures;
// asserts only that every response is complete and correct (no timing assertions).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/fake_engine.h"
#include "server/http_server.h"
#include "server/http_test_client.h"

namespace hz {
namespace {

using Clock = std::chrono::steady_clock;

TEST(HttpLoadTest, StreamingThroughputAtConcurrency) {
  test::FakeEngine engine({.max_model_len = 4096, .max_queue = 64, .max_running = 16});
  ServerOptions o;
  o.port = 0;
  o.access_log = false;
  HttpServer server(engine, o);
  ASSERT_TRUE(server.start().ok());
  constexpr int kRequestsPerClient = 200;
  constexpr int kMaxTokens = 32;
  for (int concurrency : {1, 4, 16}) {
    std::vector<std::vector<double>> ttft(concurrency);
    std::vector<int> ok(concurrency, 0);
    auto t0 = Clock::now();
    std::vector<std::thread> clients;
    for (int c = 0; c < concurrency; ++c) {
      clients.emplace_back([&, c] {
        test::TestConnection conn(server.port());
        for (int i = 0; i < kRequestsPerClient; ++i) {
          auto start = Clock::now();
          conn.send_request("POST", "/v1/completions",
                            R"({"prompt": "abcd", "stream": true, "max_tokens": )" + std::to_string(kMaxTokens) + "}");
          std::string head = conn.read_until("\"text\":");
          ttft[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
          auto r = conn.read_response();
          if (r && r->status == 200 && r->body.find("data: [DONE]") != std::string::npos) ++ok[c];
        }
      });
    }
    for (auto& t : clients) t.join();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> all;
    int total_ok = 0;
    for (int c = 0; c < concurrency; ++c) {
      all.insert(all.end(), ttft[c].begin(), ttft[c].end());
      total_ok += ok[c];
    }
    std::sort(all.begin(), all.end());
    int n = concurrency * kRequestsPerClient;
    EXPECT_EQ(total_ok, n);
    std::printf("concurrency %2d: %4d streamed requests in %.2f s = %.0f req/s, %.0f tokens/s; "
                "TTFT p50 %.2f ms p99 %.2f ms\n",
                concurrency, n, secs, n / secs, n * kMaxTokens / secs, all[all.size() / 2],
                all[std::min(all.size() - 1, all.size() * 99 / 100)]);
  }
}

}  // namespace
}  // namespace hz
