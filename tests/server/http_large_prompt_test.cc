// Large prompts do not stall the HTTP I/O threads: bodies are parsed and tokenized on the request
// workers, so /health stays responsive while 4 clients send 3.9 MB prompts; a prompt that cannot
// fit the context is refused by its byte length without being tokenized; the worker queue is
// bounded (503 past it).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "server/fake_engine.h"
#include "server/http_server.h"
#include "server/http_test_client.h"
#include "server/request_workers.h"

namespace hz {
namespace {

using Clock = std::chrono::steady_clock;
using test::FakeEngine;
using test::http_request;
using test::HttpResponse;

constexpr size_t kPromptBytes = 3900 * 1000;

std::string big_body() {
  std::string prompt(kPromptBytes, 'a');
  for (size_t i = 0; i < prompt.size(); i += 7) prompt[i] = ' ';
  return R"({"max_tokens": 1, "prompt": ")" + prompt + "\"}";
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(HttpLargePromptTest, HealthStaysResponsiveWhileLargePromptsAreTokenized) {
  // A tokenizer costing ~0.6 s per 3.9 MB prompt (a real one takes about that long).
  FakeEngine engine({.max_model_len = 8 << 20, .max_queue = 64, .tokenize_cost_per_kib = std::chrono::microseconds(160)});
  ServerOptions o;
  o.port = 0;
  o.access_log = false;
  o.max_body_bytes = 8 << 20;
  HttpServer server(engine, o);
  ASSERT_TRUE(server.start().ok());
  const int port = server.port();
  const std::string body = big_body();

  // The time to tokenize one such prompt, measured in this run.
  const auto t0 = Clock::now();
  (void)engine.tokenize(std::string(kPromptBytes, 'a'), true, true);
  const double tokenize_s = seconds_since(t0);

  constexpr int kClients = 4, kRequestsEach = 2;
  std::atomic<int> done{0}, ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < kRequestsEach; ++i) {
        if (http_request(port, "POST", "/v1/completions", body).status == 200) ++ok;
      }
      ++done;
    });
  }
  std::vector<double> health_s;
  while (done.load() < kClients) {
    const auto h0 = Clock::now();
    HttpResponse r = http_request(port, "GET", "/health");
    health_s.push_back(seconds_since(h0));
    EXPECT_EQ(r.status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kClients * kRequestsEach);
  ASSERT_GE(health_s.size(), 10u);
  std::sort(health_s.begin(), health_s.end());
  const double p50 = health_s[health_s.size() / 2];
  const double p99 = health_s[std::min(health_s.size() - 1, health_s.size() * 99 / 100)];
  std::printf("tokenize one prompt %.3f s; /health under load: %zu probes, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              tokenize_s, health_s.size(), p50 * 1e3, p99 * 1e3, health_s.back() * 1e3);
  EXPECT_LE(p99, 0.25 * tokenize_s);
}

TEST(HttpLargePromptTest, PromptThatCannotFitIsRefusedWithoutTokenizing) {
  FakeEngine engine({.max_model_len = 4096, .max_token_bytes = 16});
  ServerOptions o;
  o.port = 0;
  o.access_log = false;
  o.max_body_bytes = 8 << 20;
  HttpServer server(engine, o);
  ASSERT_TRUE(server.start().ok());
  HttpResponse r = http_request(server.port(), "POST", "/v1/completions", big_body());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("context_length_exceeded"), std::string::npos) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("3900"), std::string::npos) << r.body.substr(0, 300);
  const std::string chat = R"({"messages": [{"role": "user", "content": ")" + std::string(70000, 'b') + "\"}]}";
  r = http_request(server.port(), "POST", "/v1/chat/completions", chat);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(engine.tokenize_calls(), 0);
  // Within the bound: tokenized as usual.
  r = http_request(server.port(), "POST", "/v1/completions", R"({"prompt": "abc", "max_tokens": 1})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(engine.tokenize_calls(), 1);
}

TEST(RequestWorkersTest, QueueIsBoundedAndDrainsOnStop) {
  RequestWorkers w(1, 2);
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  auto blocker = [&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++ran;
  };
  EXPECT_TRUE(w.try_post(blocker));
  EXPECT_TRUE(w.try_post([&] { ++ran; }));
  EXPECT_FALSE(w.try_post([&] { ++ran; }));  // one running + one queued = the bound
  EXPECT_EQ(w.pending(), 2u);
  release = true;
  w.stop();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_FALSE(w.try_post([&] { ++ran; }));
}

TEST(HttpLargePromptTest, FullWorkerQueueIs503) {
  FakeEngine engine({.max_model_len = 8 << 20, .max_queue = 64, .tokenize_cost_per_kib = std::chrono::microseconds(2000)});
  ServerOptions o;
  o.port = 0;
  o.access_log = false;
  o.request_threads = 1;
  o.max_pending_requests = 1;
  HttpServer server(engine, o);
  ASSERT_TRUE(server.start().ok());
  const int port = server.port();
  // ~0.5 s of tokenizing holds the only slot.
  const std::string slow = R"({"max_tokens": 1, "prompt": ")" + std::string(256 * 1024, 'x') + "\"}";
  std::thread first([&] { EXPECT_EQ(http_request(port, "POST", "/v1/completions", slow).status, 200); });
  for (int i = 0; i < 200 && engine.tokenize_calls() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  HttpResponse r = http_request(port, "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 1})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(http_request(port, "GET", "/health").status, 200);
  first.join();
}

}  // namespace
}  // namespace hz
