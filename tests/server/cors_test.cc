// CORS: --allowed-origins parsing, the preflight answered before auth, Access-Control-* headers on
// answers (plain, error and streamed) for allowed origins only, and nothing when CORS is off.
#include "server/cors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/fake_engine.h"
#include "server/http_server.h"
#include "server/http_test_client.h"

namespace hz {
namespace {

using test::http_request;
using test::HttpResponse;

TEST(CorsPolicyTest, ParsesCommaListsAndJsonArrays) {
  auto a = CorsPolicy::parse_flag(" https://a.example , http://localhost:3000/ ");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, (std::vector<std::string>{"https://a.example", "http://localhost:3000"}));
  auto b = CorsPolicy::parse_flag(R"(["*"])");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, std::vector<std::string>{"*"});
  for (const char* bad : {"a.example", "https://a.example/path", "[1]", "[\"x\"", "https://"}) {
    auto r = CorsPolicy::parse_flag(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--allowed-origins"), std::string::npos) << r.status().message();
  }
}

TEST(CorsPolicyTest, AllowsListedOriginsOnly) {
  CorsPolicy p({"https://a.example"});
  EXPECT_TRUE(p.allows("https://a.example"));
  EXPECT_TRUE(p.allows("HTTPS://A.EXAMPLE"));
  EXPECT_FALSE(p.allows("https://b.example"));
  EXPECT_FALSE(p.allows("https://a.example.evil"));
  EXPECT_FALSE(p.allows(""));
  CorsPolicy any({"*"});
  EXPECT_TRUE(any.allows("http://x:1"));
  EXPECT_FALSE(any.allows("http://x\r\nSet-Cookie: a"));  // echoed back: never with control bytes
  EXPECT_TRUE(CorsPolicy({}).response_headers("https://a.example").empty());
  EXPECT_FALSE(CorsPolicy({}).preflight("https://a.example", "POST", "").has_value());
}

class CorsServerTest : public ::testing::Test {
 protected:
  void start(std::vector<std::string> origins) {
    engine_ = std::make_unique<test::FakeEngine>();
    ServerOptions o;
    o.port = 0;
    o.access_log = false;
    o.api_keys = {"k"};
    o.allowed_origins = std::move(origins);
    server_ = std::make_unique<HttpServer>(*engine_, o);
    ASSERT_TRUE(server_->start().ok());
  }
  HttpResponse req(const std::string& method, const std::string& path, const std::string& body,
                   const std::vector<std::string>& headers) {
    return http_request(server_->port(), method, path, body, headers);
  }
  std::unique_ptr<test::FakeEngine> engine_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(CorsServerTest, PreflightIsAnsweredBeforeAuth) {
  start({"https://app.example"});
  HttpResponse r = req("OPTIONS", "/v1/chat/completions", "",
                       {"Origin: https://app.example", "Access-Control-Request-Method: POST",
                        "Access-Control-Request-Headers: authorization, content-type, x-stainless-os"});
  EXPECT_EQ(r.status, 204) << r.body;
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://app.example");
  EXPECT_EQ(r.headers["access-control-allow-methods"], "GET, POST, OPTIONS");
  EXPECT_EQ(r.headers["access-control-allow-headers"], "authorization, content-type, x-stainless-os");
  EXPECT_EQ(r.headers["access-control-max-age"], "600");
  EXPECT_NE(r.headers["vary"].find("Origin"), std::string::npos);

  r = req("OPTIONS", "/v1/chat/completions", "", {"Origin: https://evil.example", "Access-Control-Request-Method: POST"});
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
  EXPECT_NE(r.body.find("--allowed-origins"), std::string::npos) << r.body;
  r = req("OPTIONS", "/v1/models", "", {"Origin: https://app.example", "Access-Control-Request-Method: DELETE"});
  EXPECT_EQ(r.status, 403);
}

TEST_F(CorsServerTest, AnswersCarryTheHeadersForAllowedOrigins) {
  start({"https://app.example"});
  const std::vector<std::string> allowed = {"Origin: https://app.example", "Authorization: Bearer k"};
  HttpResponse r = req("GET", "/v1/models", "", allowed);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://app.example");
  EXPECT_NE(r.headers["access-control-expose-headers"].find("X-Request-Id"), std::string::npos);
  // Errors too (else the page cannot read why), e.g. a missing key.
  r = req("GET", "/v1/models", "", {"Origin: https://app.example"});
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://app.example");
  // Streams: the headers are in the hand-written head.
  r = req("POST", "/v1/completions", R"({"prompt": "abc", "max_tokens": 3, "stream": true})", allowed);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["access-control-allow-origin"], "https://app.example");
  EXPECT_EQ(r.headers["vary"], "Origin");
  // Another origin: no allowing header, the browser keeps the answer from the page.
  r = req("GET", "/v1/models", "", {"Origin: https://evil.example", "Authorization: Bearer k"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(r.headers["vary"], "Origin");
}

TEST_F(CorsServerTest, OffByDefault) {
  start({});
  HttpResponse r = req("OPTIONS", "/v1/chat/completions", "",
                       {"Origin: https://app.example", "Access-Control-Request-Method: POST"});
  EXPECT_EQ(r.status, 401);  // an ordinary request: the API key is checked first
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
  r = req("GET", "/v1/models", "", {"Origin: https://app.example", "Authorization: Bearer k"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(r.headers.count("vary"), 0u);
}

TEST_F(CorsServerTest, WildcardAllowsAnyOrigin) {
  start({"*"});
  HttpResponse r = req("OPTIONS", "/v1/completions", "", {"Origin: http://localhost:5173", "Access-Control-Request-Method: POST"});
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.headers["access-control-allow-origin"], "http://localhost:5173");
}

}  // namespace
}  // namespace hz
