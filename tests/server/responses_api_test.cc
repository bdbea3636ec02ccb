// The Responses API's translation to a chat body and its Response objects and event streams.
#include "server/responses_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hz {
namespace {

using ojson = nlohmann::ordered_json;

ojson convert(const std::string& body, std::string* echo = nullptr) {
  std::string chat, e;
  auto err = responses_to_chat_body(body, &chat, &e);
  EXPECT_FALSE(err) << (err ? err->message : "");
  if (echo != nullptr) *echo = e;
  return err ? ojson() : ojson::parse(chat);
}

ApiError refusal(const std::string& body) {
  std::string chat, echo;
  auto err = responses_to_chat_body(body, &chat, &echo);
  EXPECT_TRUE(err) << body;
  return err ? *err : ApiError{};
}

TEST(ResponsesApiTest, StringInputInstructionsAndSampling) {
  std::string echo;
  ojson c = convert(R"({"model": "m", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 7,
                        "temperature": 0, "store": false, "metadata": {"k": "v"}})",
                    &echo);
  EXPECT_EQ(c["model"], "m");
  EXPECT_EQ(c["max_tokens"], 7);
  EXPECT_EQ(c["temperature"], 0);
  ASSERT_EQ(c["messages"].size(), 2u);
  EXPECT_EQ(c["messages"][0], ojson({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(c["messages"][1], ojson({{"role", "user"}, {"content", "Hi"}}));
  EXPECT_FALSE(c.contains("store"));
  const ojson e = ojson::parse(echo);
  EXPECT_EQ(e["instructions"], "Be brief.");
  EXPECT_EQ(e["max_output_tokens"], 7);
  EXPECT_EQ(e["metadata"]["k"], "v");
}

TEST(ResponsesApiTest, ItemsToolsAndFormats) {
  ojson c = convert(R"({"input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                     {"type": "input_text", "text": "in Oslo?"}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
    "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": true}}})");
  const ojson& m = c["messages"];
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "Weather in Oslo?");
  EXPECT_EQ(m[2]["role"], "assistant");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);  // one turn's calls join one message
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[3], ojson({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}));
  EXPECT_EQ(c["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(c["tools"][0]["function"]["strict"], true);
  EXPECT_EQ(c["tool_choice"]["function"]["name"], "get_weather");
  EXPECT_EQ(c["parallel_tool_calls"], false);
  EXPECT_EQ(c["response_format"]["type"], "json_schema");
  EXPECT_EQ(c["response_format"]["json_schema"]["name"], "w");
  EXPECT_EQ(convert(R"({"input": "x", "text": {"format": {"type": "json_object"}}})")["response_format"]["type"],
            "json_object");
  EXPECT_FALSE(convert(R"({"input": "x", "text": {"format": {"type": "text"}}})").contains("response_format"));
}

TEST(ResponsesApiTest, RefusalsNameTheField) {
  EXPECT_EQ(refusal(R"({"model": "m"})").param, "input");
  EXPECT_EQ(refusal(R"({"input": "x", "previous_response_id": "resp_1"})").param, "previous_response_id");
  EXPECT_EQ(refusal(R"({"input": "x", "reasoning": "low"})").param, "reasoning");
  EXPECT_EQ(refusal(R"({"input": "x", "reasoning": {"budget": 5}})").param, "reasoning.budget");
  EXPECT_EQ(refusal(R"({"input": "x", "reasoning": {"effort": "max"}})").param, "reasoning.effort");
  EXPECT_EQ(convert(R"({"input": "x", "reasoning": {"effort": "low", "summary": "auto"}})")["reasoning_effort"], "low");
  EXPECT_EQ(refusal(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})").param,
            "input[0].content[0]");
  EXPECT_EQ(refusal(R"({"input": [{"type": "computer_call"}]})").param, "input[0].type");
  EXPECT_EQ(refusal(R"({"input": [{"type": "reasoning", "content": [{"type": "image"}]}]})").param,
            "input[0].content[0]");
  // A type that is not a string (found by the request fuzzer: it threw).
  EXPECT_EQ(refusal(R"({"input": [{"role": "user", "content": "x"}, {"type": {"t": "object"}}]})").param, "input[1].type");
  EXPECT_EQ(refusal(R"({"input": [{"type": 7, "role": "user", "content": "x"}]})").param, "input[0].type");
  EXPECT_EQ(refusal(R"({"input": [{"role": "tool", "content": "x"}]})").param, "input[0].role");
  EXPECT_EQ(refusal(R"({"input": "x", "tools": [{"type": "web_search"}]})").param, "tools[0].type");
  EXPECT_EQ(refusal(R"({"input": "x", "text": {"format": {"type": "xml"}}})").param, "text.format.type");
  EXPECT_EQ(refusal(R"({"input": "x", "truncation": "auto"})").param, "truncation");
  EXPECT_EQ(refusal("[1]").http_status, 400);
}

GenerationEvent tokens(const std::string& text) {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kTokens;
  e.text = text;
  return e;
}

GenerationEvent finished(FinishReason r) {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kFinished;
  e.finish_reason = r;
  e.prompt_tokens = 5;
  e.completion_tokens = 3;
  e.cached_tokens = 2;
  return e;
}

TEST(ResponsesApiTest, BodyHasOutputItemsUsageAndStatus) {
  ResponsesWriter w("resp_0123456789abcdef", "m", 77, R"({"instructions": "x", "tools": []})", ReplyFormat{});
  ojson r = ojson::parse(w.body("Hello", finished(FinishReason::kStop)));
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"], "resp_0123456789abcdef");
  EXPECT_EQ(r["created_at"], 77);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["instructions"], "x");
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(r["usage"]["input_tokens"], 5);
  EXPECT_EQ(r["usage"]["output_tokens"], 3);
  EXPECT_EQ(r["usage"]["total_tokens"], 8);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 2);
  ojson cut = ojson::parse(w.body("Hel", finished(FinishReason::kLength)));
  EXPECT_EQ(cut["status"], "incomplete");
  EXPECT_EQ(cut["incomplete_details"]["reason"], "max_output_tokens");

  ResponsesWriter tools("resp_0123456789abcdef", "m", 1, "{}", ReplyFormat{ToolCallFormat::kHermes, /*parallel=*/false});
  ojson t = ojson::parse(tools.body("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
                                    "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
                                    finished(FinishReason::kStop)));
  ASSERT_EQ(t["output"].size(), 1u);  // parallel_tool_calls false: the first call only, no empty message
  EXPECT_EQ(t["output"][0]["type"], "function_call");
  EXPECT_EQ(t["output"][0]["name"], "f");
  EXPECT_EQ(t["output"][0]["arguments"], R"({"a":1})");
  EXPECT_EQ(t["output"][0]["call_id"].get<std::string>().rfind("call_", 0), 0u);
}

// The events of a stream, in order, with their sequence numbers checked.
std::vector<ojson> events(const std::string& sse) {
  std::vector<ojson> out;
  for (size_t p = 0; p < sse.size();) {
    size_t q = sse.find("\n\n", p);
    const std::string block = sse.substr(p, q - p);
    const size_t nl = block.find('\n');
    ojson data = ojson::parse(block.substr(nl + 7));
    EXPECT_EQ(block.substr(7, nl - 7), data["type"]);
    out.push_back(data);
    p = q + 2;
  }
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i]["sequence_number"], i);
  return out;
}

TEST(ResponsesApiTest, StreamEventsInOrderAndMatchingTheBody) {
  ResponsesWriter w("resp_0123456789abcdef", "m", 1, "{}", ReplyFormat{ToolCallFormat::kHermes});
  std::string s = w.stream_start();
  s += w.stream_tokens(tokens("Let me "));
  s += w.stream_tokens(tokens("check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"));
  s += w.stream_finish(finished(FinishReason::kStop));
  std::vector<std::string> types;
  std::string text;
  for (const ojson& e : events(s)) {
    types.push_back(e["type"]);
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
  }
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done", "response.output_item.done",
                       "response.output_item.added", "response.function_call_arguments.delta",
                       "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(text, "Let me check.");
  const ojson done = events(s).back()["response"];
  ResponsesWriter same("resp_0123456789abcdef", "m", 1, "{}", ReplyFormat{ToolCallFormat::kHermes});
  const ojson body = ojson::parse(same.body("Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
                                            finished(FinishReason::kStop)));
  EXPECT_EQ(done["output"], body["output"]);
  EXPECT_EQ(done["usage"], body["usage"]);
}

TEST(ResponsesApiTest, FailedStreamEndsWithAnError) {
  ResponsesWriter w("resp_1", "m", 1, "{}", ReplyFormat{});
  std::string s = w.stream_start();
  s += w.stream_finish(finished(FinishReason::kError));
  std::vector<ojson> ev = events(s);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[2]["type"], "error");
  EXPECT_EQ(ev[3]["type"], "response.failed");
  EXPECT_EQ(ev[3]["response"]["status"], "failed");
}

}  // namespace
}  // namespace hz
