// Anthropic Messages requests translated to chat bodies (system, blocks, tools, tool_choice) and
// refused with the field named; replies written as a message object and as the event stream.
#include "server/anthropic.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hz {
namespace {

using json = nlohmann::ordered_json;

json translate(const std::string& body) {
  std::string out;
  auto e = anthropic_to_chat_body(body, &out);
  EXPECT_FALSE(e) << e->message;
  return e ? json() : json::parse(out);
}

TEST(AnthropicRequestTest, TranslatesMessagesToolsAndChoice) {
  json c = translate(R"({"model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}],
      "stop_sequences": ["x"], "metadata": {"user_id": "u"},
      "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true},
      "messages": [{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": [{"type": "text", "text": "ok"},
                                                     {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
                                                {"type": "text", "text": "and?"}]}]})");
  EXPECT_EQ(c["max_tokens"], 9);
  EXPECT_EQ(c["stop"], json({"x"}));
  EXPECT_FALSE(c.contains("metadata"));
  ASSERT_EQ(c["messages"].size(), 5u) << c.dump();
  EXPECT_EQ(c["messages"][0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(c["messages"][2]["tool_calls"][0]["function"]["arguments"], R"({"a":1})");
  EXPECT_EQ(c["messages"][2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(c["messages"][3], json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "42"}}));
  EXPECT_EQ(c["messages"][4], json({{"role", "user"}, {"content", "and?"}}));
  EXPECT_EQ(c["tools"][0]["function"]["parameters"], json({{"type", "object"}}));
  EXPECT_EQ(c["tool_choice"]["function"]["name"], "f");
  EXPECT_EQ(c["parallel_tool_calls"], false);
  EXPECT_EQ(translate(R"({"max_tokens": 1, "messages": [], "tools": [{"name": "f"}], "tool_choice": {"type": "any"}})")["tool_choice"],
            "required");
}

TEST(AnthropicRequestTest, RefusalsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"messages": []})", "max_tokens"},
      {R"({"max_tokens": 1, "messages": [], "thinking": {}})", "thinking"},
      {R"({"max_tokens": 1, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role"},
      {R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image"}]}]})", "messages[0].content[0]"},
      {R"({"max_tokens": 1, "messages": [], "tool_choice": {"type": "maybe"}})", "tool_choice"},
      {R"({"max_tokens": 1, "messages": [], "tool_choice": {"type": "auto", "disable_parallel_tool_use": "yes"}})",
       "tool_choice.disable_parallel_tool_use"},
      {R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",)"
       R"( "content": "r", "is_error": 1}]}]})",
       "messages[0].content[0].is_error"},
      {R"({"max_tokens": 1, "messages": [], "tools": [{"name": "f", "cache_control": {}}]})", "tools[0].cache_control"},
  };
  for (const Case& c : cases) {
    std::string out;
    auto e = anthropic_to_chat_body(c.body, &out);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
  }
}

GenerationEvent finished(FinishReason r) {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kFinished;
  e.finish_reason = r;
  e.prompt_tokens = 5;
  e.completion_tokens = 7;
  return e;
}

TEST(AnthropicWriterTest, MessageObjectWithToolUse) {
  AnthropicWriter w("msg_0123456789abcdef01234567", "m", 5, ReplyFormat{ToolCallFormat::kHermes});
  json m = json::parse(w.body("Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", finished(FinishReason::kStop)));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_EQ(m["content"].size(), 2u);
  EXPECT_EQ(m["content"][0], json({{"type", "text"}, {"text", "Sure."}}));
  EXPECT_EQ(m["content"][1]["type"], "tool_use");
  EXPECT_EQ(m["content"][1]["input"], json({{"a", 1}}));
  EXPECT_EQ(m["content"][1]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(m["usage"], json({{"input_tokens", 5}, {"output_tokens", 7}}));
  AnthropicWriter plain("msg_1", "m", 5, ReplyFormat{});
  EXPECT_EQ(json::parse(plain.body("hello", finished(FinishReason::kLength)))["stop_reason"], "max_tokens");
}

TEST(AnthropicWriterTest, EventStream) {
  AnthropicWriter w("msg_1", "m", 5, ReplyFormat{});
  std::string s = w.stream_start();
  GenerationEvent t;
  t.text = "Hi";
  s += w.stream_tokens(t);
  s += w.stream_finish(finished(FinishReason::kStop));
  std::vector<std::string> events;
  for (size_t at = s.find("event: "); at != std::string::npos; at = s.find("event: ", at + 1)) {
    events.push_back(s.substr(at + 7, s.find('\n', at) - at - 7));
  }
  EXPECT_EQ(events, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                              "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_NE(s.find(R"("delta":{"type":"text_delta","text":"Hi"})"), std::string::npos) << s;
  EXPECT_NE(s.find(R"("stop_reason":"end_turn")"), std::string::npos) << s;
}

}  // namespace
}  // namespace hz
