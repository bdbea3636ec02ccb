// The chat and status pages in a real browser: Debian's chromium driven by puppeteer-core
// (tests/e2e/web_ui.mjs) against `horizon serve` on stories260K, without and with --api-key.
// Screenshots land in <build>/web-screenshots/. Skipped only where chromium or puppeteer-core is
// missing outside CI: scripts/setup installs both, and under scripts/test (HORIZON_REQUIRE_BROWSER)
// or with CI set their absence fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

namespace fs = std::filesystem;

std::string chromium() {
  const char* env = std::getenv("HORIZON_CHROMIUM");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
}

// Empty when the browser test can run, else why not.
std::string missing_tools() {
  if (access(chromium().c_str(), X_OK) != 0) return chromium() + " is not installed (scripts/setup installs it)";
  fs::path puppeteer = fs::path(HORIZON_SOURCE_DIR) / "tests/npm/node_modules/puppeteer-core/package.json";
  if (!fs::exists(puppeteer)) return "puppeteer-core is not installed in tests/npm (scripts/setup installs it)";
  if (test::run_command("node --version") != 0) return "node is not installed";
  return "";
}

std::string screenshot_dir() {
  fs::path dir = fs::path(HORIZON_BINARY).parent_path() / "web-screenshots";
  fs::create_directories(dir);
  return dir.string();
}

class WebUiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = missing_tools();
    if (why.empty()) return;
    if (std::getenv("CI") != nullptr || std::getenv("HORIZON_REQUIRE_BROWSER") != nullptr) {
      FAIL() << "the browser test must run here: " << why;
    }
    GTEST_SKIP() << "no browser test: " << why;
  }

  // Serves stories260K with room for a long reply (the one the test stops) and prefix caching (hit
  // rates on the status page), then runs the script.
  nlohmann::json run(const std::vector<std::string>& extra_args, const std::string& api_key) {
    std::vector<std::string> args = {"-m",           test::model_path("stories260K.gguf"),
                                     "--threads",    "1",
                                     "--max-model-len", "16384",
                                     "--enable-prefix-caching"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    test::ServerProcess srv(args);
    EXPECT_TRUE(srv.ok()) << srv.log();
    if (!srv.ok()) return {};
    std::string out, err;
    std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/web_ui.mjs";
    int rc = test::run_command("node " + script + " " + srv.base_url() + " " + screenshot_dir() + " " + api_key,
                               &out, &err);
    EXPECT_EQ(rc, 0) << err << "\nserver log:\n" << srv.log();
    if (rc != 0) return {};
    return nlohmann::json::parse(out);
  }
};

void expect_flow_passed(const nlohmann::json& r) {
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["markdown"], "ok");
  EXPECT_EQ(r["html_reply"], "text");
  EXPECT_FALSE(r["short_reply"]["text"].get<std::string>().empty());
  EXPECT_GE(r["stop"]["running_mid_stream"].get<int>(), 1);
  EXPECT_EQ(r["stop"]["running_after"], 0);
  EXPECT_GE(r["stop"]["status_499"].get<int>(), 1);
  EXPECT_GT(r["status_page"]["finished_after"].get<double>(), r["status_page"]["finished_before"].get<double>());
  EXPECT_GT(r["status_page"]["generated_after"].get<double>(), r["status_page"]["generated_before"].get<double>());
  for (const auto& file : r["screenshots"]) EXPECT_TRUE(fs::exists(file.get<std::string>())) << file;
}

TEST_F(WebUiTest, ChatStreamsStopsAndStatusPageFollowsWithoutKey) {
  nlohmann::json r = run({}, "");
  expect_flow_passed(r);
}

TEST_F(WebUiTest, ChatAndStatusPageAskForTheApiKey) {
  nlohmann::json r = run({"--api-key", "web-test-key"}, "web-test-key");
  expect_flow_passed(r);
  EXPECT_EQ(r["status_page"]["asked_for_key"], true);
}

TEST_F(WebUiTest, ReasoningShowsInItsOwnBlock) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "1", "--chat-template",
                           "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  std::string out, err;
  const std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/web_reasoning.mjs";
  ASSERT_EQ(test::run_command("node " + script + " " + srv.base_url() + " " + screenshot_dir(), &out, &err), 0)
      << err << "\nserver log:\n" << srv.log();
  EXPECT_FALSE(nlohmann::json::parse(out)["thoughts"].get<std::string>().empty());
}

}  // namespace
}  // namespace hz
