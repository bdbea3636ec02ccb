// POST /v1/messages (Anthropic's Messages API) on stories260K through the official Anthropic
// client: a text message (greedy, equal to its stream and to the SDK's stream accumulation), the
// event sequence, a forced tool's input validating against its schema (streamed the same), a
// tool_result going back, and the x-api-key header for auth.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

TEST(AnthropicMessagesE2ETest, OfficialClientTextStreamingAndToolUse) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--max-model-len", "2048",
                           "--api-key", "k"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  std::string out, err;
  const std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/anthropic_messages.mjs";
  ASSERT_EQ(test::run_command("node " + script + " " + srv.base_url() + " k stories260K.gguf", &out, &err), 0)
      << err << "\n" << srv.log();
  const json r = json::parse(out);

  EXPECT_EQ(r["text"]["type"], "message");
  EXPECT_EQ(r["text"]["role"], "assistant");
  EXPECT_EQ(r["text"]["id_prefix"], "msg_");
  EXPECT_EQ(r["text"]["stop_reason"], "max_tokens");
  EXPECT_EQ(r["text"]["usage"]["output_tokens"], 24);
  ASSERT_EQ(r["text"]["content"].size(), 1u);
  EXPECT_EQ(r["text"]["content"][0]["type"], "text");
  const std::string text = r["text"]["content"][0]["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(r["stream"]["text"], text);
  EXPECT_EQ(r["stream"]["first"], "message_start");
  EXPECT_EQ(r["stream"]["last"], "message_stop");
  EXPECT_EQ(r["stream"]["types"], json({"message_start", "content_block_start", "content_block_delta",
                                       "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(r["stream_helper"]["content"], r["text"]["content"]);
  EXPECT_EQ(r["stream_helper"]["stop_reason"], "max_tokens");

  EXPECT_EQ(r["tool"]["stop_reason"], "tool_use");
  EXPECT_EQ(r["tool"]["name"], "get_weather");
  EXPECT_EQ(r["tool"]["id_prefix"], "toolu_");
  EXPECT_TRUE(r["tool"]["valid"].get<bool>()) << r["tool"].dump();
  EXPECT_EQ(r["tool_stream"]["stop_reason"], "tool_use");
  EXPECT_EQ(r["tool_stream"]["name"], "get_weather");
  EXPECT_EQ(r["tool_stream"]["input"], r["tool"]["input"]);
  EXPECT_GT(r["round_trip"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(r["bad_key"], 401);
}

}  // namespace
}  // namespace hz
