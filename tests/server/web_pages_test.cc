// The web pages compiled into the server (chat at /, status at /status) and the status page's JSON
// feed, over real HTTP against a FakeEngine: routes, content types, revalidation, security headers,
// auth on the feed, and that every file a page references is served.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "server/fake_server.h"
#include "server/http_test_client.h"
#include "server/web_assets.h"

namespace hz {
namespace {

using nlohmann::json;
using test::FakeEngine;
using test::http_request;
using test::HttpResponse;

class WebPagesTest : public test::FakeServerTest {
 protected:
  void start(const std::string& api_key = "") {
    ServerOptions o;
    o.access_log = false;
    if (!api_key.empty()) o.api_keys = {api_key};
    FakeServerTest::start(o);
  }
  HttpResponse get(const std::string& path, const std::vector<std::string>& headers = {}) {
    return http_request(port_, "GET", path, "", headers);
  }
};

TEST_F(WebPagesTest, PagesComeWithTheirTypesAndAStrictPolicy) {
  start();
  for (const auto& [path, type] : std::vector<std::pair<std::string, std::string>>{
           {"/", "text/html; charset=utf-8"},
           {"/status", "text/html; charset=utf-8"},
           {"/chat.js", "text/javascript; charset=utf-8"},
           {"/status.js", "text/javascript; charset=utf-8"},
           {"/markdown.js", "text/javascript; charset=utf-8"},
           {"/style.css", "text/css; charset=utf-8"},
           {"/favicon.svg", "image/svg+xml"}}) {
    HttpResponse r = get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.headers["content-type"], type) << path;
    EXPECT_EQ(r.headers["x-content-type-options"], "nosniff") << path;
    EXPECT_EQ(r.headers["cache-control"], "no-cache") << path;
    const std::string& csp = r.headers["content-security-policy"];
    EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << path;
    EXPECT_NE(csp.find("script-src 'self';"), std::string::npos) << path;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << path;
    EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos) << path;
    EXPECT_FALSE(r.body.empty()) << path;
  }
  EXPECT_NE(get("/").body.find("<script type=\"module\" src=\"/chat.js\">"), std::string::npos);
}

TEST_F(WebPagesTest, AMatchingETagGets304WithoutBody) {
  start();
  HttpResponse first = get("/chat.js");
  std::string etag = first.headers["etag"];
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(etag.front(), '"');
  HttpResponse again = get("/chat.js", {"If-None-Match: " + etag});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(again.headers["etag"], etag);
  EXPECT_EQ(get("/chat.js", {"If-None-Match: \"other\", W/" + etag}).status, 304);
  EXPECT_EQ(get("/chat.js", {"If-None-Match: *"}).status, 304);
  EXPECT_EQ(get("/chat.js", {"If-None-Match: \"other\""}).status, 200);
  // Another file has another tag.
  EXPECT_EQ(get("/style.css", {"If-None-Match: " + etag}).status, 200);
}

TEST_F(WebPagesTest, OnlyGetAndOnlyKnownFiles) {
  start();
  HttpResponse post = http_request(port_, "POST", "/", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["allow"], "GET");
  EXPECT_EQ(get("/missing.js").status, 404);
  EXPECT_EQ(get("/index.html").status, 404);  // pages only under their routes
  EXPECT_EQ(get("/status.html").status, 404);
  EXPECT_EQ(get("/../CMakeLists.txt").status, 404);
  EXPECT_EQ(get("/web/chat.js").status, 404);
  EXPECT_EQ(get("/?x=1").status, 200);
}

// Every /file a page or script names (src=, href=, import from) is embedded: a renamed file fails here.
TEST_F(WebPagesTest, EveryReferencedFileIsServed) {
  start();
  std::regex ref(R"((?:src|href)="(/[^"]*)\"|from '\./([^']+)'|import\('(/[^']+)'\))");
  int num_refs = 0;
  for (const EmbeddedFile& f : embedded_web_files()) {
    std::string body(f.body);
    for (auto it = std::sregex_iterator(body.begin(), body.end(), ref); it != std::sregex_iterator(); ++it) {
      std::string path = "/";  // import paths are relative: './x.js' -> '/x.js'
      if ((*it)[1].matched) path = (*it)[1].str();
      if ((*it)[2].matched) path.append((*it)[2].str());
      if ((*it)[3].matched) path = (*it)[3].str();
      ++num_refs;
      EXPECT_EQ(get(path).status, 200) << f.name << " refers to " << path;
    }
  }
  EXPECT_GE(num_refs, 8);
}

TEST_F(WebPagesTest, StatusFeedCarriesTiersQueueAndHistograms) {
  start();
  HttpResponse r = get("/v1/status");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["cache-control"], "no-store");
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "horizon.status");
  EXPECT_EQ(j["requests"]["running"], 0);
  EXPECT_EQ(j["kv"]["ram"]["blocks_total"], 64);
  EXPECT_EQ(j["kv"]["ram"]["blocks_free"], 64);
  EXPECT_EQ(j["kv"]["disk"]["enabled"], false);
  EXPECT_EQ(j["kv"]["far"]["enabled"], false);
  EXPECT_TRUE(j["kv"]["prefix_cache"].contains("hits"));
  for (const char* h : {"ttft_seconds", "itl_seconds"}) {
    const json& hist = j["latency"][h];
    EXPECT_EQ(hist["buckets"].size(), hist["bounds"].size() + 1) << h;
    EXPECT_EQ(hist["count"], 0) << h;
  }
  // A finished request shows up in the counters and the TTFT histogram.
  HttpResponse done = http_request(port_, "POST", "/v1/completions", R"({"prompt":"hello","max_tokens":3})");
  ASSERT_EQ(done.status, 200) << done.body;
  json after = json::parse(get("/v1/status").body);
  EXPECT_EQ(after["latency"]["ttft_seconds"]["count"], 1);
  uint64_t in_buckets = 0;
  for (const auto& b : after["latency"]["ttft_seconds"]["buckets"]) in_buckets += b.get<uint64_t>();
  EXPECT_EQ(in_buckets, 1u);
  EXPECT_GT(after["tokens"]["generation_total"].get<uint64_t>(), 0u);
  EXPECT_EQ(get("/v1/status").status, 200);
  EXPECT_EQ(http_request(port_, "POST", "/v1/status", "{}").status, 405);
}

TEST_F(WebPagesTest, WithAnApiKeyPagesArePublicAndTheFeedIsNot) {
  start("sekret");
  EXPECT_EQ(get("/").status, 200);
  EXPECT_EQ(get("/status").status, 200);
  EXPECT_EQ(get("/status.js").status, 200);
  EXPECT_EQ(get("/v1/status").status, 401);
  EXPECT_EQ(get("/v1/status", {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(get("/v1/status", {"Authorization: Bearer sekret"}).status, 200);
}

}  // namespace
}  // namespace hz
