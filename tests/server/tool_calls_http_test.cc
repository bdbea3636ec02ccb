// Tool calls over HTTP against a FakeEngine whose chat template marks it Hermes-capable and makes
// the fake "model" say the last user message: the reply is parsed into tool_calls (ids, names,
// JSON arguments, finish_reason tool_calls), streamed as OpenAI's tool-call deltas that reassemble
// to the non-streamed reply, content around calls kept, tool_choice none leaves text alone, and a
// required call needs the grammar engine (refused clearly by an engine without a tokenizer).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/fake_engine.h"
#include "server/http_server.h"
#include "server/http_test_client.h"

namespace hz {
namespace {

using nlohmann::json;
using test::http_request;
using test::HttpResponse;

// Says the last message, then "END" (a stop string, so replies finish with "stop"); lists the
// tools it was given in a comment-free way only when asked (see ToolsReachTheTemplate).
constexpr const char* kTemplate =
    "{#- <tool_call> marks the Hermes format -#}"
    "{%- if messages[-1]['content'] == 'list tools' -%}{%- for t in tools -%}[{{ t.function.name }}]{%- endfor -%}"
    "{%- else -%}{{ messages[-1]['content'] }}{%- endif -%}END";

const char* kCall = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
                    "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

class ToolCallsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = std::make_unique<test::FakeEngine>(test::FakeEngine::Options{.max_model_len = 4096});
    ServerOptions o;
    o.port = 0;
    o.access_log = false;
    o.chat_template = kTemplate;
    server_ = std::make_unique<HttpServer>(*engine_, o);
    ASSERT_TRUE(server_->start().ok());
  }
  json request(const std::string& content, bool stream, const json& extra = json::object()) {
    json body = {{"messages", {{{"role", "user"}, {"content", content}}}},
                 {"max_tokens", 1000},
                 {"stop", {"END"}},
                 {"stream", stream},
                 {"tools",
                  {{{"type", "function"},
                    {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}},
                   {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}};
    body.update(extra);
    return body;
  }
  HttpResponse post(const json& body) { return http_request(server_->port(), "POST", "/v1/chat/completions", body.dump()); }

  std::unique_ptr<test::FakeEngine> engine_;
  std::unique_ptr<HttpServer> server_;
};

// Reassembles a streamed chat reply the way clients do: content concatenated, tool calls by index.
json reassemble(const std::string& sse) {
  json msg = {{"content", ""}, {"tool_calls", json::array()}};
  std::string finish;
  for (const std::string& p : test::sse_payloads(sse)) {
    if (p == "[DONE]") break;
    json c = json::parse(p);
    const json& ch = c["choices"][0];
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    const json& d = ch["delta"];
    if (d.contains("content") && d["content"].is_string()) {
      EXPECT_EQ(d["content"].get<std::string>().find("<tool_call"), std::string::npos) << p;
      msg["content"] = msg["content"].get<std::string>() + d["content"].get<std::string>();
    }
    if (d.contains("tool_calls")) {
      for (const json& t : d["tool_calls"]) {
        size_t i = t["index"];
        if (i >= msg["tool_calls"].size()) msg["tool_calls"].push_back({{"function", {{"name", ""}, {"arguments", ""}}}});
        json& dst = msg["tool_calls"][i];
        if (t.contains("id")) dst["id"] = t["id"];
        if (t.contains("type")) dst["type"] = t["type"];
        if (t["function"].contains("name")) dst["function"]["name"] = t["function"]["name"];
        dst["function"]["arguments"] =
            dst["function"]["arguments"].get<std::string>() + t["function"].value("arguments", std::string());
      }
    }
  }
  msg["finish_reason"] = finish;
  return msg;
}

TEST_F(ToolCallsHttpTest, RepliesCarryParsedToolCalls) {
  HttpResponse r = post(request(kCall, false));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  const json& ch = j["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  EXPECT_EQ(ch["message"]["content"], "Checking.");
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 2u) << r.body;
  const json& c0 = ch["message"]["tool_calls"][0];
  EXPECT_EQ(c0["type"], "function");
  EXPECT_EQ(c0["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(c0["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(c0["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_NE(c0["id"], ch["message"]["tool_calls"][1]["id"]);
  EXPECT_EQ(ch["message"]["tool_calls"][1]["function"]["arguments"], "{}");
}

TEST_F(ToolCallsHttpTest, StreamedDeltasReassembleToTheReply) {
  HttpResponse whole = post(request(kCall, false));
  HttpResponse streamed = post(request(kCall, true));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  json a = json::parse(whole.body)["choices"][0];
  json b = reassemble(streamed.body);
  EXPECT_EQ(b["finish_reason"], a["finish_reason"]);
  EXPECT_EQ(b["content"], a["message"]["content"]);
  ASSERT_EQ(b["tool_calls"].size(), a["message"]["tool_calls"].size());
  for (size_t i = 0; i < b["tool_calls"].size(); ++i) {
    EXPECT_EQ(b["tool_calls"][i]["function"], a["message"]["tool_calls"][i]["function"]) << i;
    EXPECT_EQ(b["tool_calls"][i]["type"], "function");
    EXPECT_EQ(b["tool_calls"][i]["id"].get<std::string>().size(), a["message"]["tool_calls"][i]["id"].get<std::string>().size());
  }
}

TEST_F(ToolCallsHttpTest, PlainTextAndToolChoiceNone) {
  json j = json::parse(post(request("It is sunny <tool", false)).body)["choices"][0];
  EXPECT_EQ(j["message"]["content"], "It is sunny <tool");
  EXPECT_FALSE(j["message"].contains("tool_calls"));
  EXPECT_EQ(j["finish_reason"], "stop");
  json s = reassemble(post(request("It is sunny <tool", true)).body);
  EXPECT_EQ(s["content"], "It is sunny <tool");
  EXPECT_EQ(s["finish_reason"], "stop");
  // none: the model's text is content, whatever it looks like.
  j = json::parse(post(request(kCall, false, {{"tool_choice", "none"}})).body)["choices"][0];
  EXPECT_EQ(j["message"]["content"], kCall);
  EXPECT_EQ(j["finish_reason"], "stop");
}

TEST_F(ToolCallsHttpTest, ToolsReachTheTemplate) {
  json j = json::parse(post(request("list tools", false)).body)["choices"][0];
  EXPECT_EQ(j["message"]["content"], "[get_weather][get_time]");
  j = json::parse(post(request("list tools", false, {{"tool_choice", "none"}})).body)["choices"][0];
  EXPECT_EQ(j["message"]["content"], "");
}

TEST_F(ToolCallsHttpTest, ResultsGoBackThroughTheTemplate) {
  json body = request("done", false);
  body["messages"] = json::parse(R"([
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "15 C"},
      {"role": "user", "content": "thanks"}])");
  HttpResponse r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "thanks");
}

TEST_F(ToolCallsHttpTest, RequiredCallsNeedTheGrammarEngine) {
  HttpResponse r = post(request(kCall, false, {{"tool_choice", "required"}}));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "tools");
}

}  // namespace
}  // namespace hz
