// Several API keys, per-key rate limits and the first-token timeout: the token bucket on a fake
// clock, then the server (on the fake engine) answering 429 with Retry-After per key and per
// client address, and 504 for a request whose first token does not come in time.
#include "server/rate_limit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "server/auth.h"
#include "server/fake_server.h"
#include "server/http_test_client.h"

namespace hz {
namespace {

using test::FakeEngine;
using test::http_request;
using test::HttpResponse;
using Clock = RateLimiter::Clock;

TEST(RateLimiterTest, BurstOfTheLimitThenOneRequestPerRefill) {
  RateLimiter l(6);  // 6 a minute: one every 10 s
  const Clock::time_point t0{};
  for (int i = 0; i < 6; ++i) {
    const auto d = l.take("a", t0);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.remaining, 5 - i);
    EXPECT_EQ(d.limit, 6);
  }
  auto d = l.take("a", t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_NEAR(d.retry_after_s, 10.0, 1e-9);
  EXPECT_NEAR(d.reset_s, 60.0, 1e-9);
  // Refused requests take nothing: 9.9 s later still refused, at 10 s one passes.
  EXPECT_FALSE(l.take("a", t0 + std::chrono::milliseconds(9900)).allowed);
  EXPECT_TRUE(l.take("a", t0 + std::chrono::seconds(10)).allowed);
  EXPECT_FALSE(l.take("a", t0 + std::chrono::seconds(10)).allowed);
  // Clients are independent.
  EXPECT_TRUE(l.take("b", t0).allowed);
  // After a long pause the bucket is full again, not more than full.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(l.take("a", t0 + std::chrono::hours(1)).allowed) << i;
  EXPECT_FALSE(l.take("a", t0 + std::chrono::hours(1)).allowed);
}

TEST(RateLimiterTest, OffMeansUnlimited) {
  RateLimiter l(0);
  EXPECT_FALSE(l.enabled());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(l.take("a").allowed);
  EXPECT_EQ(l.clients(), 0u);
}

TEST(RateLimiterTest, ManyClientsDoNotGrowWithoutBound) {
  RateLimiter l(60);
  const Clock::time_point t0{};
  for (int i = 0; i < 10000; ++i) l.take("client " + std::to_string(i), t0 + std::chrono::seconds(i));
  EXPECT_LT(l.clients(), 5000u);
  // A client in the middle of its minute is kept (its bucket is not full).
  EXPECT_FALSE(l.take("client 9999", t0 + std::chrono::seconds(9999)).remaining == 59);
}

TEST(MatchingKeyTest, EitherHeaderAndAnyKey) {
  const std::vector<std::string> keys = {"alpha-key", "beta-key"};
  EXPECT_EQ(matching_key("Bearer alpha-key", "", keys), 0);
  EXPECT_EQ(matching_key("bearer beta-key", "", keys), 1);
  EXPECT_EQ(matching_key("", "beta-key", keys), 1);
  EXPECT_EQ(matching_key("Bearer gamma", "", keys), -1);
  EXPECT_EQ(matching_key("Bearer alpha-ke", "", keys), -1);
  EXPECT_EQ(matching_key("", "", keys), -1);
  EXPECT_EQ(redact_target("/v1/x?q=alpha-key&r=beta-key", keys), "/v1/x?q=REDACTED&r=REDACTED");
}

class ServerLimitsTest : public test::FakeServerTest {
 protected:
  HttpResponse complete(const std::string& key) {
    std::vector<std::string> headers = {"Content-Type: application/json"};
    if (!key.empty()) headers.push_back("Authorization: Bearer " + key);
    return http_request(port_, "POST", "/v1/completions", R"({"prompt": "abc", "max_tokens": 2})", headers);
  }
};

TEST_F(ServerLimitsTest, EachKeyHasItsOwnBucket) {
  ServerOptions o;
  o.api_keys = {"key-one", "key-two"};
  o.rate_limit_rpm = 2;
  start(o);
  EXPECT_EQ(complete("key-one").status, 200);
  EXPECT_EQ(complete("key-one").status, 200);
  const HttpResponse r = complete("key-one");
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(r.body.find("rate_limit_exceeded"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("2 requests per minute"), std::string::npos) << r.body;
  ASSERT_TRUE(r.headers.count("retry-after"));
  const int retry = std::stoi(r.headers.at("retry-after"));
  EXPECT_GE(retry, 29);
  EXPECT_LE(retry, 30);
  EXPECT_EQ(r.headers.at("x-ratelimit-limit-requests"), "2");
  EXPECT_EQ(r.headers.at("x-ratelimit-remaining-requests"), "0");
  // The other key, Anthropic's header, and the endpoints that generate nothing are not limited.
  EXPECT_EQ(complete("key-two").status, 200);
  EXPECT_EQ(http_request(port_, "POST", "/v1/completions", R"({"prompt": "abc", "max_tokens": 2})",
                         {"Content-Type: application/json", "x-api-key: key-two"})
                .status,
            200);
  EXPECT_EQ(complete("key-two").status, 429);
  EXPECT_EQ(http_request(port_, "GET", "/v1/models", "", {"Authorization: Bearer key-one"}).status, 200);
  // A wrong key is 401, not 429, and takes nothing.
  EXPECT_EQ(complete("key-three").status, 401);
  EXPECT_EQ(complete("").status, 401);
  // Refused requests never reached the engine.
  EXPECT_EQ(engine_->submitted(), 4);
  const HttpResponse m = http_request(port_, "GET", "/metrics");
  EXPECT_NE(m.body.find("horizon_requests_rate_limited_total{model_name=\"fake-model\"} 2"), std::string::npos) << m.body;
}

TEST_F(ServerLimitsTest, WithoutKeysEachAddressHasABucket) {
  ServerOptions o;
  o.rate_limit_rpm = 1;
  start(o);
  EXPECT_EQ(complete("").status, 200);
  EXPECT_EQ(complete("").status, 429);
  EXPECT_EQ(complete("whatever").status, 429);  // no keys: a key names no client
}

TEST_F(ServerLimitsTest, NoLimitByDefault) {
  ServerOptions o;
  o.api_keys = {"k"};
  start(o);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(complete("k").status, 200) << i;
}

// The engine holds the request (paused): past the first-token timeout it is 504, streamed or not,
// and a request that did get its first token in time is unaffected.
TEST_F(ServerLimitsTest, FirstTokenTimeoutIs504) {
  ServerOptions o;
  o.first_token_timeout = std::chrono::milliseconds(300);
  start(o);
  engine_->set_paused(true);
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse r = complete("");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_NE(r.body.find("first_token_timeout"), std::string::npos) << r.body;
  EXPECT_GE(waited, 0.3);
  r = http_request(port_, "POST", "/v1/completions", R"({"prompt": "abc", "max_tokens": 2, "stream": true})",
                   {"Content-Type: application/json"});
  EXPECT_EQ(r.status, 200);  // the stream had started: the error comes in it
  EXPECT_NE(r.body.find("first_token_timeout"), std::string::npos) << r.body;
  engine_->set_paused(false);
  r = complete("");
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace hz
