// POST /v1/responses (OpenAI's Responses API) on stories260K through the official openai client:
// text (greedy, equal streamed by hand and through the client's stream helper), a named function
// call whose arguments validate against its schema (streamed the same), a call and its output going
// back, json_schema output that validates, and previous_response_id refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

TEST(ResponsesE2ETest, OfficialClientTextToolsAndSchemas) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--max-model-len", "2048"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  std::string out, err;
  const std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/openai_responses.mjs";
  ASSERT_EQ(test::run_command("node " + script + " " + srv.base_url(), &out, &err), 0) << err << "\n" << srv.log();
  const json r = json::parse(out);

  EXPECT_EQ(r["text"]["object"], "response");
  EXPECT_EQ(r["text"]["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["text"]["status"], "incomplete");  // 24 tokens, cut
  EXPECT_EQ(r["text"]["incomplete"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["text"]["usage"]["output_tokens"], 24);
  EXPECT_GT(r["text"]["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(r["text"]["instructions"], "Tell a story.");
  EXPECT_EQ(r["text"]["items"], json({"message"}));
  const std::string text = r["text"]["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(r["stream"]["text"], text);
  EXPECT_EQ(r["stream"]["final_text"], text);
  EXPECT_EQ(r["stream"]["status"], "incomplete");
  EXPECT_EQ(r["stream"]["types"], json({"response.created", "response.in_progress", "response.output_item.added",
                                       "response.content_part.added", "response.output_text.delta",
                                       "response.output_text.done", "response.content_part.done",
                                       "response.output_item.done", "response.incomplete"}));
  EXPECT_EQ(r["stream_helper"]["text"], text);

  for (const char* k : {"tool", "tool_stream"}) {
    SCOPED_TRACE(k);
    EXPECT_EQ(r[k]["status"], "completed");
    ASSERT_EQ(r[k]["calls"].size(), 1u) << r[k].dump();
    EXPECT_EQ(r[k]["calls"][0]["name"], "get_weather");
    EXPECT_TRUE(r[k]["calls"][0]["valid"].get<bool>()) << r[k].dump();
    EXPECT_EQ(r[k]["calls"][0]["call_id"].get<std::string>().rfind("call_", 0), 0u);
  }
  EXPECT_EQ(r["tool_stream"]["calls"][0]["arguments"], r["tool"]["calls"][0]["arguments"]);
  EXPECT_GT(r["round_trip"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(r["schema"]["status"], "completed");
  EXPECT_TRUE(r["schema"]["valid"].get<bool>()) << r["schema"].dump();
  EXPECT_EQ(r["previous"], 400);
}

}  // namespace
}  // namespace hz
