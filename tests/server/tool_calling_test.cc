// Tool calling pieces without a server: tools/tool_choice parsing, the grammar that constrains a
// required call in each format (accepts valid calls, refuses arguments off the schema), the
// conversation as published templates render it (calls and results go back through the
// template), the generic form for templates without tools, and the streaming gate.
#include "server/tool_calling.h"

#include <gtest/gtest.h>


#include "grammar/grammar.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "support/test_support.h"

namespace hz {
namespace {

using ojson = nlohmann::ordered_json;

ToolRequest tools(const char* choice_json = "\"auto\"", bool parallel = true) {
  ojson body = ojson::parse(R"({"tools": [
      {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
       "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                      "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                      "required": ["city", "days"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get_time"}}]})");
  body["tool_choice"] = ojson::parse(choice_json);
  body["parallel_tool_calls"] = parallel;
  ToolRequest r;
  auto e = parse_tool_request(body, &r);
  EXPECT_FALSE(e) << e->message;
  return r;
}

bool accepts(const std::string& grammar_text, const std::string& text) {
  auto g = grammar::Grammar::parse(grammar_text);
  EXPECT_TRUE(g.ok()) << g.status().to_string() << "\n" << grammar_text;
  return g.ok() && g->accepts(text);
}

TEST(ToolRequestTest, ParsesToolsChoiceAndParallel) {
  ToolRequest r = tools(R"({"type": "function", "function": {"name": "get_time"}})", false);
  ASSERT_EQ(r.defs.size(), 2u);
  EXPECT_EQ(r.defs[0].name, "get_weather");
  EXPECT_EQ(r.defs[1].parameters, ojson::parse(R"({"type": "object", "properties": {}})"));
  EXPECT_EQ(r.choice, ToolChoice::kNamed);
  EXPECT_EQ(r.named, "get_time");
  EXPECT_FALSE(r.parallel);
  EXPECT_TRUE(r.active());
  EXPECT_FALSE(tools("\"none\"").active());
  EXPECT_EQ(tools("\"required\"").choice, ToolChoice::kRequired);
}

TEST(ToolPlanTest, AutoWithANativeTemplateIsUnconstrained) {
  auto s = plan_tool_calls(tools(), ToolCallFormat::kHermes);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->format, ToolCallFormat::kHermes);
  EXPECT_TRUE(s->grammar.empty());
  EXPECT_TRUE(s->system_text.empty());
  EXPECT_EQ(plan_tool_calls(tools("\"none\""), ToolCallFormat::kHermes)->format, ToolCallFormat::kNone);
}

TEST(ToolPlanTest, RequiredHermesCallsFollowTheSchema) {
  auto s = plan_tool_calls(tools("\"required\""), ToolCallFormat::kHermes);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
  EXPECT_TRUE(accepts(s->grammar, call));
  EXPECT_TRUE(accepts(s->grammar, call + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(s->grammar, "Sure."));
  EXPECT_FALSE(accepts(s->grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}}\n</tool_call>"));
  EXPECT_FALSE(accepts(s->grammar, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  // One call only without parallel_tool_calls.
  auto single = plan_tool_calls(tools("\"required\"", false), ToolCallFormat::kHermes);
  EXPECT_TRUE(accepts(single->grammar, call));
  EXPECT_FALSE(accepts(single->grammar, call + "\n" + call));
}

TEST(ToolPlanTest, NamedCallsInEachFormat) {
  ToolRequest named = tools(R"({"type": "function", "function": {"name": "get_weather"}})");
  const std::string args = R"({"city": "Oslo", "days": 1})";
  auto mistral = plan_tool_calls(named, ToolCallFormat::kMistral);
  ASSERT_TRUE(mistral.ok());
  EXPECT_TRUE(accepts(mistral->grammar, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": " + args + "}]"));
  EXPECT_FALSE(accepts(mistral->grammar, "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}}]"));
  auto llama = plan_tool_calls(named, ToolCallFormat::kLlama3);
  ASSERT_TRUE(llama.ok());
  EXPECT_TRUE(accepts(llama->grammar, "{\"name\": \"get_weather\", \"parameters\": " + args + "}"));
  EXPECT_FALSE(accepts(llama->grammar, "{\"name\": \"get_weather\", \"arguments\": " + args + "}"));
  auto generic = plan_tool_calls(named, ToolCallFormat::kNone);
  ASSERT_TRUE(generic.ok());
  EXPECT_EQ(generic->format, ToolCallFormat::kGeneric);
  EXPECT_TRUE(accepts(generic->grammar, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": " + args + "}]}"));
  EXPECT_FALSE(accepts(generic->grammar, "{\"response\": \"hi\"}"));
  EXPECT_NE(generic->system_text.find("\"name\":\"get_weather\""), std::string::npos) << generic->system_text;
  EXPECT_NE(generic->system_text.find("Call the tool get_weather"), std::string::npos);
}

TEST(ToolPlanTest, GenericAutoAllowsATextResponse) {
  auto s = plan_tool_calls(tools(), ToolCallFormat::kNone);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(accepts(s->grammar, "{\"response\": \"It is sunny.\"}"));
  EXPECT_TRUE(accepts(s->grammar, "{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}]}"));
  EXPECT_FALSE(accepts(s->grammar, "It is sunny."));
}

TEST(ToolPlanTest, UnsupportedSchemaIsRefusedOnlyWhenACallIsRequired) {
  ojson body = ojson::parse(R"({"tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "\\bx"}}}}}]})");
  ToolRequest r;
  ASSERT_FALSE(parse_tool_request(body, &r));
  r.choice = ToolChoice::kRequired;
  auto s = plan_tool_calls(r, ToolCallFormat::kHermes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("tools[0].function.parameters"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("the escape"), std::string::npos) << s.status().message();
  r.choice = ToolChoice::kAuto;  // generic auto: that tool's arguments are any object
  auto g = plan_tool_calls(r, ToolCallFormat::kNone);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(accepts(g->grammar, R"({"tool_calls": [{"name": "f", "arguments": {"s": "b"}}]})"));
}

std::vector<ChatMessage> round_trip() {
  std::vector<ChatMessage> m(4);
  m[0].role = "user";
  m[0].content = "Weather in Paris?";
  m[1].role = "assistant";
  m[1].tool_calls.push_back({"call_abc123xyz", "get_weather", R"({"city": "Paris", "days": 1})"});
  m[2].role = "tool";
  m[2].tool_call_id = "call_abc123xyz";
  m[2].content = "15 C";
  m[3].role = "user";
  m[3].content = "Thanks";
  return m;
}

TEST(ToolTemplateTest, QwenTemplateRendersToolsCallsAndResults) {
  ModelInfo info;
  info.chat_template = test::chat_template_fixture("Qwen-Qwen2.5-7B-Instruct.jinja");
  ToolRequest req = tools();
  auto setup = plan_tool_calls(req, detect_tool_call_format(info.chat_template));
  ASSERT_TRUE(setup.ok());
  auto p = render_chat_prompt(info, round_trip(), req, *setup);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE(p->text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""), std::string::npos) << p->text;
  EXPECT_NE(p->text.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1}}\n</tool_call>"),
            std::string::npos) << p->text;
  EXPECT_NE(p->text.find("<tool_response>\n15 C\n</tool_response>"), std::string::npos) << p->text;
  // tool_choice none: the template gets no tools.
  auto none = render_chat_prompt(info, round_trip(), tools("\"none\""), {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->text.find("<tools>"), std::string::npos);
}

TEST(ToolTemplateTest, Llama31TemplateRendersToolsCallsAndResults) {
  ModelInfo info;
  info.chat_template = test::chat_template_fixture("meta-llama-Llama-3.1-8B-Instruct.jinja");
  info.bos_token = "<|begin_of_text|>";
  ToolRequest req = tools();
  auto setup = plan_tool_calls(req, detect_tool_call_format(info.chat_template));
  ASSERT_TRUE(setup.ok());
  EXPECT_EQ(setup->format, ToolCallFormat::kLlama3);
  auto p = render_chat_prompt(info, round_trip(), req, *setup);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE(p->text.find("\"name\": \"get_weather\""), std::string::npos) << p->text;
  EXPECT_NE(p->text.find("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 1}}"), std::string::npos) << p->text;
  EXPECT_NE(p->text.find("<|start_header_id|>ipython<|end_header_id|>\n\n\"15 C\""), std::string::npos) << p->text;
}

TEST(ToolTemplateTest, TemplatesWithoutToolsGetTheGenericForm) {
  ModelInfo info;  // no template: the built-in ChatML
  ToolRequest req = tools(R"({"type": "function", "function": {"name": "get_weather"}})");
  auto setup = plan_tool_calls(req, ToolCallFormat::kNone);
  ASSERT_TRUE(setup.ok());
  auto p = render_chat_prompt(info, round_trip(), req, *setup);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->text.rfind("<|im_start|>system\nYou can call these tools", 0), 0u) << p->text;
  EXPECT_NE(p->text.find("<|im_start|>assistant\n{\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":1}}]}<|im_end|>"),
            std::string::npos) << p->text;
  EXPECT_NE(p->text.find("<|im_start|>user\n{\"tool_response\":{\"tool_call_id\":\"call_abc123xyz\",\"content\":\"15 C\"}}\nThanks<|im_end|>"),
            std::string::npos) << p->text;
  // A template that refuses system turns (Gemma) gets the description in the first user turn.
  info.chat_template = test::chat_template_fixture("google-gemma-2-2b-it.jinja");
  p = render_chat_prompt(info, round_trip(), req, *setup);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE(p->text.find("<start_of_turn>user\nYou can call these tools"), std::string::npos) << p->text;
}

TEST(ToolCallIdTest, FormatsAndMistralLength) {
  EXPECT_EQ(tool_call_id("0123456789abcdef0123456789", 1, ToolCallFormat::kHermes), "call_0123456789abcdef01234501");
  const std::string m = tool_call_id("0123456789abcdef", 3, ToolCallFormat::kMistral);
  EXPECT_EQ(m.size(), 9u);
  EXPECT_EQ(m, "012345603");
}

// Feeds `text` one byte at a time; returns the content streamed before the end.
std::string feed_bytes(ToolStreamGate& g, const std::string& text) {
  std::string out;
  for (char c : text) out += g.feed(std::string(1, c));
  return out;
}

TEST(ToolStreamGateTest, HermesContentStreamsAndCallsWaitForTheEnd) {
  const std::string reply = "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  ToolStreamGate g(ToolCallFormat::kHermes);
  EXPECT_EQ(feed_bytes(g, reply), "Let me check.");
  ParsedReply r = g.finish();
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"a":1})");
  // Together, streamed and final equal the non-streamed parse.
  ParsedReply whole = parse_tool_calls(reply, ToolCallFormat::kHermes);
  EXPECT_EQ(whole.content, "Let me check.");
}

TEST(ToolStreamGateTest, MarkerPrefixesAreReleasedWhenNoCallFollows) {
  ToolStreamGate g(ToolCallFormat::kHermes);
  EXPECT_EQ(g.feed("a <tool"), "a");
  EXPECT_EQ(g.feed("box> b "), " <toolbox> b");
  EXPECT_EQ(g.finish().content, " ");
  ToolStreamGate broken(ToolCallFormat::kHermes);  // a call cut short: everything is content
  EXPECT_EQ(broken.feed("x <tool_call>{\"na"), "x");
  ParsedReply r = broken.finish();
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, " <tool_call>{\"na");
}

TEST(ToolStreamGateTest, Llama3AndGeneric) {
  ToolStreamGate text(ToolCallFormat::kLlama3);
  EXPECT_EQ(feed_bytes(text, " Hello"), " Hello");
  ToolStreamGate call(ToolCallFormat::kLlama3);
  EXPECT_EQ(feed_bytes(call, R"( {"name": "f", "parameters": {}})"), "");
  EXPECT_EQ(call.finish().tool_calls.size(), 1u);
  ToolStreamGate generic(ToolCallFormat::kGeneric);
  EXPECT_EQ(feed_bytes(generic, R"({"response": "hi"})"), "");
  ParsedReply r = generic.finish();
  EXPECT_EQ(r.content, "hi");
  EXPECT_TRUE(r.tool_calls.empty());
}

}  // namespace
}  // namespace hz
