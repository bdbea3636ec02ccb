// HttpServer against hostile clients: RFC 9112 framing rules (Transfer-Encoding, Content-Length,
// Host), /metrics behind the API key, and no credential from a URL in the access log.
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "server/auth.h"
#include "server/fake_server.h"
#include "server/http_test_client.h"

namespace hz {
namespace {

using test::FakeEngine;
using test::http_request;
using test::HttpResponse;
using test::TestConnection;

class HttpHardeningTest : public test::FakeServerTest {
 protected:

  // Sends `head` (and `body`) on a fresh connection: expects 400 naming `needle`, then the
  // connection closed, and nothing submitted to the engine.
  void expect_refused(const std::string& head, const std::string& body, const std::string& needle) {
    SCOPED_TRACE(head);
    TestConnection c(port_);
    ASSERT_TRUE(c.send_raw(head + "\r\n" + body));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find(needle), std::string::npos) << r->body;
    EXPECT_EQ(r->headers["connection"], "close");
    EXPECT_TRUE(c.wait_closed());
    EXPECT_EQ(engine_->submitted(), 0);
  }
};

const std::string kBody = R"({"prompt": "abc", "max_tokens": 2})";
std::string chunked(const std::string& body) {
  std::ostringstream s;
  s << std::hex << body.size() << "\r\n" << body << "\r\n0\r\n\r\n";
  return s.str();
}

TEST_F(HttpHardeningTest, TransferEncodingWhoseFinalCodingIsNotChunkedIs400) {
  start();
  for (const char* te : {"gzip", "chunked, gzip", "identity", "chunkedx"}) {
    expect_refused(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ") + te + "\r\n",
                   chunked(kBody), "Transfer-Encoding");
  }
}

TEST_F(HttpHardeningTest, TransferEncodingWithContentLengthIs400) {
  start();
  expect_refused("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: " +
                     std::to_string(kBody.size()) + "\r\n",
                 chunked(kBody), "");
  expect_refused("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(kBody.size()) +
                     "\r\nTransfer-Encoding: chunked\r\n",
                 chunked(kBody), "");
}

TEST_F(HttpHardeningTest, MissingOrRepeatedHostIs400) {
  start();
  expect_refused("GET /health HTTP/1.1\r\n", "", "must have a Host header");
  expect_refused("GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n", "", "more than one Host header");
  expect_refused("POST /v1/completions HTTP/1.1\r\nContent-Length: " + std::to_string(kBody.size()) + "\r\n", kBody,
                 "must have a Host header");
}

TEST_F(HttpHardeningTest, WellFramedRequestsStillServed) {
  start();
  // Chunked body, HTTP/1.0 without Host, ordinary requests: all fine.
  TestConnection c(port_);
  ASSERT_TRUE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                         chunked(kBody)));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  TestConnection c10(port_);
  ASSERT_TRUE(c10.send_raw("GET /health HTTP/1.0\r\n\r\n"));
  auto r10 = c10.read_response();
  ASSERT_TRUE(r10);
  EXPECT_EQ(r10->status, 200);
  EXPECT_EQ(http_request(port_, "GET", "/health").status, 200);
}

TEST_F(HttpHardeningTest, MetricsAuthPutsMetricsBehindTheKey) {
  ServerOptions o;
  o.api_keys = {"sekret-key"};
  o.metrics_auth = true;
  start(o);
  HttpResponse r = http_request(port_, "GET", "/metrics");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(http_request(port_, "GET", "/metrics", "", {"Authorization: Bearer wrong"}).status, 401);
  r = http_request(port_, "GET", "/metrics", "", {"Authorization: Bearer sekret-key"});
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("horizon_"), std::string::npos);
  EXPECT_EQ(http_request(port_, "GET", "/health").status, 200);  // probes stay open
}

TEST_F(HttpHardeningTest, MetricsOpenWithoutMetricsAuth) {
  ServerOptions o;
  o.api_keys = {"sekret-key"};
  start(o);
  EXPECT_EQ(http_request(port_, "GET", "/metrics").status, 200);
}

TEST(RedactTargetTest, CredentialParametersAndTheKeyAreRedacted) {
  EXPECT_EQ(redact_target("/v1/models"), "/v1/models");
  EXPECT_EQ(redact_target("/v1/models?limit=3&x"), "/v1/models?limit=3&x");
  EXPECT_EQ(redact_target("/v1/models?api_key=abc&limit=3"), "/v1/models?api_key=REDACTED&limit=3");
  EXPECT_EQ(redact_target("/m?Token=abc&access_token=d&AUTH=e&sig=f&key="), "/m?Token=REDACTED&access_token=REDACTED&AUTH=REDACTED&sig=REDACTED&key=REDACTED");
  EXPECT_EQ(redact_target("/v1/sekret-key/x?q=sekret-key", "sekret-key"), "/v1/REDACTED/x?q=REDACTED");
}

TEST_F(HttpHardeningTest, AccessLogNeverShowsAKeyFromTheUrl) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  ServerOptions o;
  o.api_keys = {"sekret-key"};
  o.access_log = true;
  start(o);
  EXPECT_EQ(http_request(port_, "GET", "/v1/models?api_key=sekret-key").status, 401);
  EXPECT_EQ(http_request(port_, "GET", "/health?q=sekret-key&token=other-secret").status, 200);
  server_.reset();  // every access line is written
  spdlog::default_logger()->sinks().pop_back();
  const std::string text = log.str();
  EXPECT_NE(text.find("/v1/models?api_key=REDACTED"), std::string::npos) << text;
  EXPECT_NE(text.find("/health?q=REDACTED&token=REDACTED"), std::string::npos) << text;
  EXPECT_EQ(text.find("sekret-key"), std::string::npos) << text;
  EXPECT_EQ(text.find("other-secret"), std::string::npos) << text;
}

}  // namespace
}  // namespace hz
