// The official `openai` npm client (tests/npm, pinned) against HttpServer + FakeEngine: completions
// and chat, streamed and not, errors. Skips when node or the npm packages are missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "server/fake_engine.h"
#include "server/http_server.h"
#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

TEST(OpenAiClientTest, OfficialClientDrivesCompletionsAndChat) {
  std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/server/openai_client.mjs";
  std::string npm = std::string(HORIZON_SOURCE_DIR) + "/tests/npm/node_modules/openai/package.json";
  if (test::run_command("node --version") != 0 || !std::filesystem::exists(npm)) {
    GTEST_SKIP() << "node or tests/npm/node_modules/openai missing (run the setup script)";
  }
  test::FakeEngine engine;
  ServerOptions o;
  o.port = 0;
  o.api_keys = {"test-key"};
  o.served_model_name = "horizon-test";
  o.access_log = false;
  HttpServer server(engine, o);
  ASSERT_TRUE(server.start().ok());

  std::string out, err;
  int rc = test::run_command(
      "node " + script + " http://127.0.0.1:" + std::to_string(server.port()) + "/v1 test-key", &out, &err);
  ASSERT_EQ(rc, 0) << "stdout:\n" << out << "\nstderr:\n" << err;
  json r = json::parse(out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << out;

  EXPECT_EQ(r["models"], json({"horizon-test"}));

  EXPECT_EQ(r["completion"]["text"], "abcab");
  EXPECT_EQ(r["completion"]["finish_reason"], "length");
  EXPECT_EQ(r["completion"]["object"], "text_completion");
  EXPECT_EQ(r["completion"]["model"], "horizon-test");
  EXPECT_EQ(r["completion"]["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(r["completion"]["usage"]["completion_tokens"], 5);
  EXPECT_EQ(r["completion"]["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  EXPECT_EQ(r["completion_stream"]["text"], "hellohe");
  EXPECT_EQ(r["completion_stream"]["finish_reason"], "length");
  EXPECT_EQ(r["completion_stream"]["usage"]["completion_tokens"], 7);
  EXPECT_EQ(r["completion_stream"]["usage"]["total_tokens"], 13);

  EXPECT_EQ(r["chat"]["content"], "<|im_start|>");
  EXPECT_EQ(r["chat"]["role"], "assistant");
  EXPECT_EQ(r["chat"]["object"], "chat.completion");
  EXPECT_EQ(r["chat"]["finish_reason"], "length");
  EXPECT_EQ(r["chat"]["usage"]["completion_tokens"], 12);

  EXPECT_EQ(r["chat_stream"]["content"], "<|im_star");
  EXPECT_EQ(r["chat_stream"]["role"], "assistant");
  EXPECT_EQ(r["chat_stream"]["finish_reason"], "length");
  EXPECT_EQ(r["chat_stream_helper"]["content"], "<|im");

  EXPECT_EQ(r["n2"]["indices"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(r["n2"]["texts"][0], r["n2"]["texts"][1]);  // the fake engine echoes the prompt
  EXPECT_EQ(r["n2"]["usage"]["completion_tokens"], 6);
  EXPECT_EQ(r["n65"]["status"], 400);
  EXPECT_EQ(r["n65"]["param"], "n");
  EXPECT_EQ(r["n65"]["type"], "invalid_request_error");
  EXPECT_EQ(r["wrong_model"]["status"], 404);
  EXPECT_EQ(r["wrong_model"]["code"], "model_not_found");
  EXPECT_EQ(r["wrong_model"]["param"], "model");
  EXPECT_EQ(r["wrong_model"]["name"], "NotFoundError");
  EXPECT_EQ(r["bad_key"]["status"], 401);
}

}  // namespace
}  // namespace hz
