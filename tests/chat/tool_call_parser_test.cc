// Tool calls parsed back from generated text in the formats published templates teach.
#include "chat/tool_call_parser.h"

#include <gtest/gtest.h>


#include "support/test_support.h"

namespace hz {
namespace {

TEST(ToolCallParserTest, DetectsTheFormatOfPublishedTemplates) {
  EXPECT_EQ(detect_tool_call_format(test::chat_template_fixture("Qwen-Qwen2.5-7B-Instruct.jinja")), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format(test::chat_template_fixture("Qwen-Qwen3-0.6B.jinja")), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format(test::chat_template_fixture("mistralai-Mistral-Nemo-Instruct-2407.jinja")), ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format(test::chat_template_fixture("meta-llama-Llama-3.1-8B-Instruct.jinja")), ToolCallFormat::kLlama3);
  EXPECT_EQ(detect_tool_call_format(test::chat_template_fixture("meta-llama-Meta-Llama-3-8B-Instruct.jinja")), ToolCallFormat::kNone);
  EXPECT_EQ(detect_tool_call_format(test::chat_template_fixture("google-gemma-2-2b-it.jinja")), ToolCallFormat::kNone);
  EXPECT_EQ(detect_tool_call_format(""), ToolCallFormat::kNone);
}

TEST(ToolCallParserTest, HermesCallsWithTextAround) {
  ParsedReply r = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
      ToolCallFormat::kHermes);
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(r.tool_calls[1].name, "get_time");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");
  // Arguments sent as a JSON string holding an object are accepted; no arguments means {}.
  r = parse_tool_calls(R"(<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>)", ToolCallFormat::kHermes);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(r.content, "");
  r = parse_tool_calls(R"(<tool_call>{"name": "f"}</tool_call>)", ToolCallFormat::kHermes);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{}");
}

TEST(ToolCallParserTest, BrokenCallsStayContent) {
  for (const char* reply : {
           "plain answer",
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1",          // cut off by max_tokens
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": }</tool_call>",  // broken JSON
           "<tool_call>{\"arguments\": {}}</tool_call>",                         // no name
           "<tool_call>{\"name\": \"\"}</tool_call>",                            // empty name
           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",       // arguments not an object
           "<tool_call>{\"name\": \"f\"}</tool_call><tool_call>oops</tool_call>",  // one bad call of two
       }) {
    SCOPED_TRACE(reply);
    ParsedReply r = parse_tool_calls(reply, ToolCallFormat::kHermes);
    EXPECT_EQ(r.content, reply);
    EXPECT_TRUE(r.tool_calls.empty());
  }
  ParsedReply r = parse_tool_calls("<tool_call>{\"name\": \"f\"}</tool_call>", ToolCallFormat::kNone);
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ToolCallParserTest, MistralList) {
  ParsedReply r = parse_tool_calls(
      R"(Sure. [TOOL_CALLS] [{"name": "a", "arguments": {"q": "x"}}, {"name": "b", "arguments": {}}])",
      ToolCallFormat::kMistral);
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "a");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"q":"x"})");
  EXPECT_EQ(r.tool_calls[1].name, "b");
  EXPECT_TRUE(parse_tool_calls("[TOOL_CALLS] []", ToolCallFormat::kMistral).tool_calls.empty());
  EXPECT_TRUE(parse_tool_calls("[TOOL_CALLS] [{\"name\": ", ToolCallFormat::kMistral).tool_calls.empty());
  EXPECT_TRUE(parse_tool_calls("no calls", ToolCallFormat::kMistral).tool_calls.empty());
}

TEST(ToolCallParserTest, Llama3JsonReply) {
  ParsedReply r = parse_tool_calls(R"( {"name": "get_weather", "parameters": {"city": "Oslo"}} )", ToolCallFormat::kLlama3);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.content, "");
  r = parse_tool_calls(R"(<|python_tag|>{"name": "f", "arguments": {"a": true}})", ToolCallFormat::kLlama3);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"a":true})");
  // Prose, or JSON that is not a call, is content.
  for (const char* reply : {"The weather is fine.", R"({"city": "Oslo"})", R"({"name": "f", "parameters": 3})"}) {
    r = parse_tool_calls(reply, ToolCallFormat::kLlama3);
    EXPECT_TRUE(r.tool_calls.empty()) << reply;
    EXPECT_EQ(r.content, reply);
  }
}

TEST(ToolCallParserTest, GenericEnvelope) {
  ParsedReply r = parse_tool_calls(R"( {"tool_calls": [{"name": "a", "arguments": {"x": "}]"}}, {"name": "b", "arguments": {}}]} )",
                                   ToolCallFormat::kGeneric);
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"x":"}]"})");
  EXPECT_EQ(r.content, "");
  r = parse_tool_calls(R"({"response": "Hi \"there\"\n"})", ToolCallFormat::kGeneric);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "Hi \"there\"\n");
}

// Cut off by max_tokens: the envelope never becomes content; finished calls are kept, as is the
// response text so far.
TEST(ToolCallParserTest, GenericEnvelopeCutOff) {
  const std::string full = R"({ "tool_calls" : [ { "name" : "get_weather" , "arguments" : { "city" : "Yes, \"}\"" } }, )"
                           R"({ "name" : "get_time" , "arguments" : { } }, { "name" : "get_weather" , "arguments" : { "city" : "Oslo" } } ] })";
  ASSERT_EQ(parse_tool_calls(full, ToolCallFormat::kGeneric).tool_calls.size(), 3u);
  size_t calls_seen = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(full.substr(0, n));
    ParsedReply r = parse_tool_calls(full.substr(0, n), ToolCallFormat::kGeneric);
    EXPECT_EQ(r.content, "");
    // Calls appear in order, each once its closing brace is in.
    EXPECT_GE(r.tool_calls.size(), calls_seen);
    calls_seen = r.tool_calls.size();
    if (!r.tool_calls.empty()) {
      EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Yes, \"}\""})");
    }
  }
  EXPECT_EQ(calls_seen, 3u);  // cuts after the third call's brace but before the envelope closes
  const std::string text = R"({"response": "Once upon a \"time\" \u00e9\u00e9 \ud83d\ude00 end"})";
  std::string last;
  for (size_t n = 0; n < text.size(); ++n) {
    ParsedReply r = parse_tool_calls(text.substr(0, n), ToolCallFormat::kGeneric);
    EXPECT_TRUE(r.tool_calls.empty());
    // The decoded text only grows, never shows an escape or the envelope.
    EXPECT_EQ(r.content.compare(0, last.size(), last), 0) << text.substr(0, n) << " -> " << r.content;
    EXPECT_EQ(r.content.find('\\'), std::string::npos) << r.content;
    EXPECT_EQ(r.content.find("response"), std::string::npos) << r.content;
    last = r.content;
  }
  EXPECT_EQ(last, "Once upon a \"time\" \xc3\xa9\xc3\xa9 \xf0\x9f\x98\x80 end");
}

}  // namespace
}  // namespace hz
