// Reasoning over HTTP against a FakeEngine whose "model" says the last user message: a reply's
// <think> block comes back as reasoning_content (streamed as reasoning_content deltas that add up
// to the same), tool calls are parsed from the answer after it, a prompt that opens the reasoning
// is recognised, --reasoning-parser none and templates without reasoning leave the text alone, and
// a client's reasoning_content goes back to the template. Also the mask that holds a grammar back
// until the reasoning has closed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>

#include "server/fake_engine.h"
#include "server/grammar_constraint.h"
#include "server/http_server.h"
#include "server/http_test_client.h"

namespace hz {
namespace {

using nlohmann::json;
using test::http_request;
using test::HttpResponse;

// The model writes its own <think> (as Qwen3 does); the template shows a history turn's reasoning.
constexpr const char* kThinkTemplate =
    "{#- models that reason write <think> ... </think> -#}"
    "{%- if messages[-1]['content'] == 'history' -%}{{ messages[-2]['reasoning_content'] }}"
    "{%- else -%}{{ messages[-1]['content'] }}{%- endif -%}END";
// The generation prompt opens the reasoning (as DeepSeek-R1's does).
constexpr const char* kOpenTemplate = "{{ messages[-1]['content'] }}END<think>\n";
// Hermes tool calls and reasoning.
constexpr const char* kToolTemplate = "{#- <tool_call> <think> -#}{{ messages[-1]['content'] }}END";
constexpr const char* kPlainTemplate = "{{ messages[-1]['content'] }}END";

class ReasoningHttpTest : public ::testing::Test {
 protected:
  void start(const char* chat_template, const std::string& parser = "auto",
             const std::function<void(ServerOptions&)>& options = {}) {
    engine_ = std::make_unique<test::FakeEngine>(test::FakeEngine::Options{.max_model_len = 4096});
    ServerOptions o;
    o.port = 0;
    o.access_log = false;
    o.chat_template = chat_template;
    o.reasoning_parser = parser;
    if (options) options(o);
    server_ = std::make_unique<HttpServer>(*engine_, o);
    ASSERT_TRUE(server_->start().ok());
  }
  json request(const std::string& content, bool stream, const json& extra = json::object()) {
    json body = {{"messages", {{{"role", "user"}, {"content", content}}}},
                 {"max_tokens", 1000},
                 {"stop", {"END"}},
                 {"stream", stream}};
    body.update(extra);
    return body;
  }
  HttpResponse post(const json& body) { return http_request(server_->port(), "POST", "/v1/chat/completions", body.dump()); }
  json message(const std::string& content, const json& extra = json::object()) {
    HttpResponse r = post(request(content, false, extra));
    EXPECT_EQ(r.status, 200) << r.body;
    json choice = json::parse(r.body)["choices"][0];
    json m = choice["message"];
    m["finish_reason"] = choice["finish_reason"];
    return m;
  }

  std::unique_ptr<test::FakeEngine> engine_;
  std::unique_ptr<HttpServer> server_;
};

// A streamed reply put together as a client does: reasoning_content and content concatenated,
// tool calls by index. No delta may carry a tag.
json reassemble(const std::string& sse) {
  json msg = {{"reasoning_content", ""}, {"content", ""}, {"tool_calls", json::array()}};
  for (const std::string& p : test::sse_payloads(sse)) {
    if (p == "[DONE]") break;
    const json ch = json::parse(p)["choices"][0];
    if (!ch["finish_reason"].is_null()) msg["finish_reason"] = ch["finish_reason"];
    const json& d = ch["delta"];
    for (const char* key : {"reasoning_content", "content"}) {
      if (!d.contains(key) || !d[key].is_string()) continue;
      const std::string text = d[key];
      EXPECT_EQ(text.find("think>"), std::string::npos) << p;
      msg[key] = msg[key].get<std::string>() + text;
    }
    if (d.contains("tool_calls")) {
      for (const json& t : d["tool_calls"]) {
        const size_t i = t["index"];
        if (i >= msg["tool_calls"].size()) msg["tool_calls"].push_back({{"name", ""}, {"arguments", ""}});
        if (t["function"].contains("name")) msg["tool_calls"][i]["name"] = t["function"]["name"];
        msg["tool_calls"][i]["arguments"] =
            msg["tool_calls"][i]["arguments"].get<std::string>() + t["function"].value("arguments", std::string());
      }
    }
  }
  return msg;
}

TEST_F(ReasoningHttpTest, TheThinkBlockComesBackAsReasoningContent) {
  start(kThinkTemplate);
  const std::string reply = "<think>\nThe sky scatters short waves.\n</think>\n\nRayleigh scattering.";
  json m = message(reply);
  EXPECT_EQ(m["reasoning_content"], "The sky scatters short waves.");
  EXPECT_EQ(m["content"], "Rayleigh scattering.");
  EXPECT_EQ(m["finish_reason"], "stop");

  json s = reassemble(post(request(reply, true)).body);
  EXPECT_EQ(s["reasoning_content"], m["reasoning_content"]);
  EXPECT_EQ(s["content"], m["content"]);
  EXPECT_EQ(s["finish_reason"], "stop");

  // A reply without reasoning has no reasoning_content and no reasoning tokens, and its text is untouched.
  EXPECT_EQ(json::parse(post(request("plain", false)).body)["usage"]["completion_tokens_details"]["reasoning_tokens"], 0);
  m = message("  Just <think> an answer.");
  EXPECT_FALSE(m.contains("reasoning_content"));
  EXPECT_EQ(m["content"], "  Just <think> an answer.");
  s = reassemble(post(request("  Just <think> an answer.", true)).body);
  EXPECT_EQ(s["reasoning_content"], "");
  EXPECT_EQ(s["content"], "  Just <think> an answer.");
}

TEST_F(ReasoningHttpTest, APromptThatOpensTheReasoningIsRecognised) {
  start(kOpenTemplate);
  json m = message("Two and two.\n</think>\n\nFour.");
  EXPECT_EQ(m["reasoning_content"], "Two and two.");
  EXPECT_EQ(m["content"], "Four.");
  json s = reassemble(post(request("Two and two.\n</think>\n\nFour.", true)).body);
  EXPECT_EQ(s["reasoning_content"], "Two and two.");
  EXPECT_EQ(s["content"], "Four.");

  // Usage counts the reasoning's tokens (one per byte here, up to and with the close tag). No stop
  // string: it would hold text back behind the tokens and blur the count by its length.
  const std::string reply = "Two and two.\n</think>\n\nFour.";
  const int reasoning_tokens = static_cast<int>(std::string("Two and two.\n</think>").size());
  json exact = {{"max_tokens", static_cast<int>(reply.size())}, {"stop", json::array()}};
  json whole = json::parse(post(request(reply, false, exact)).body);
  EXPECT_EQ(whole["usage"]["completion_tokens"], reply.size()) << whole;
  EXPECT_EQ(whole["usage"]["completion_tokens_details"]["reasoning_tokens"], reasoning_tokens) << whole;
  json usage;
  exact["stream_options"] = {{"include_usage", true}};
  for (const std::string& p : test::sse_payloads(post(request(reply, true, exact)).body)) {
    if (p != "[DONE]" && !json::parse(p)["usage"].is_null()) usage = json::parse(p)["usage"];
  }
  EXPECT_EQ(usage["completion_tokens_details"]["reasoning_tokens"], reasoning_tokens) << usage;
  exact.erase("stream_options");
  exact["n"] = 2;
  whole = json::parse(post(request(reply, false, exact)).body);
  EXPECT_EQ(whole["usage"]["completion_tokens_details"]["reasoning_tokens"], 2 * reasoning_tokens) << whole;

  // Cut by max_tokens before the reasoning closed: all of it is reasoning, the answer is empty.
  m = message("Let me think about this for a while", {{"max_tokens", 12}});
  EXPECT_EQ(m["finish_reason"], "length");
  EXPECT_EQ(m["reasoning_content"], "Let me think");
  EXPECT_EQ(m["content"], "");
  s = reassemble(post(request("Let me think about this for a while", true, {{"max_tokens", 12}})).body);
  EXPECT_EQ(s["reasoning_content"], "Let me think");
  EXPECT_EQ(s["content"], "");
  EXPECT_EQ(s["finish_reason"], "length");
}

TEST_F(ReasoningHttpTest, ToolCallsAreParsedFromTheAnswer) {
  start(kToolTemplate);
  // The reasoning mentions a call; only the answer's call is one.
  const std::string reply =
      "<think>I could write <tool_call> here.</think>\nLooking.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const json tools = {{"tools",
                       {{{"type", "function"},
                         {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}}}};
  json m = message(reply, tools);
  EXPECT_EQ(m["reasoning_content"], "I could write <tool_call> here.");
  EXPECT_EQ(m["content"], "Looking.");
  ASSERT_EQ(m["tool_calls"].size(), 1u) << m;
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["finish_reason"], "tool_calls");

  json body = request(reply, true);
  body.update(tools);
  json s = reassemble(post(body).body);
  EXPECT_EQ(s["reasoning_content"], m["reasoning_content"]);
  EXPECT_EQ(s["content"], "Looking.");
  ASSERT_EQ(s["tool_calls"].size(), 1u) << s;
  EXPECT_EQ(s["tool_calls"][0]["name"], "get_weather");
  EXPECT_EQ(json::parse(s["tool_calls"][0]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(s["finish_reason"], "tool_calls");
}

TEST_F(ReasoningHttpTest, NoneAndTemplatesWithoutReasoningLeaveTheText) {
  const std::string reply = "<think>a</think>b";
  start(kThinkTemplate, "none");
  json m = message(reply);
  EXPECT_FALSE(m.contains("reasoning_content"));
  EXPECT_EQ(m["content"], reply);
  server_.reset();

  start(kPlainTemplate);
  m = message(reply);
  EXPECT_FALSE(m.contains("reasoning_content"));
  EXPECT_EQ(m["content"], reply);
  server_.reset();

  // A parser named on the command line splits whatever the template is.
  start(kPlainTemplate, "deepseek_r1");
  m = message(reply);
  EXPECT_EQ(m["reasoning_content"], "a");
  EXPECT_EQ(m["content"], "b");
}

TEST_F(ReasoningHttpTest, HistoryReasoningReachesTheTemplate) {
  start(kThinkTemplate);
  json body = request("history", false);
  body["messages"] = json::parse(R"([
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "Hello.", "reasoning_content": "Greet back."},
      {"role": "user", "content": "history"}])");
  HttpResponse r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "Greet back.");

  body["messages"][0]["reasoning_content"] = "x";  // only assistant turns have reasoning
  r = post(body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "messages[0].reasoning_content");
  body["messages"][0].erase("reasoning_content");
  body["messages"][1]["reasoning_content"] = 5;
  r = post(body);
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST_F(ReasoningHttpTest, ReasoningEffortIsCheckedAndReachesTheTemplate) {
  start("{{ reasoning_effort }}END");
  json m = message("x", {{"reasoning_effort", "low"}});
  EXPECT_EQ(m["content"], "low");
  HttpResponse r = post(request("x", false, {{"reasoning_effort", "extreme"}}));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "reasoning_effort");
}

// The events of an SSE stream with named events (Anthropic's, the Responses API's): their data.
std::vector<json> named_events(const std::string& sse) {
  std::vector<json> out;
  for (size_t p = 0; p < sse.size();) {
    const size_t q = sse.find("\n\n", p);
    const std::string block = sse.substr(p, q - p);
    const size_t data = block.find("data: ");
    if (data != std::string::npos) out.push_back(json::parse(block.substr(data + 6)));
    if (q == std::string::npos) break;
    p = q + 2;
  }
  return out;
}

TEST_F(ReasoningHttpTest, AnthropicMessagesHaveAThinkingBlock) {
  start(kToolTemplate);
  const std::string reply = "<think>Plan <tool_call> it.</think>\nDone.";
  json body = {{"model", "fake-model"},
               {"max_tokens", 1000},
               {"stop_sequences", {"END"}},
               {"messages", {{{"role", "user"}, {"content", reply}}}}};
  HttpResponse r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json msg = json::parse(r.body);
  ASSERT_EQ(msg["content"].size(), 2u) << r.body;
  EXPECT_EQ(msg["content"][0], json({{"type", "thinking"}, {"thinking", "Plan <tool_call> it."}, {"signature", ""}}));
  EXPECT_EQ(msg["content"][1], json({{"type", "text"}, {"text", "Done."}}));

  body["stream"] = true;
  r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<int, std::string> thinking, text;
  std::vector<int> started, stopped;
  for (const json& e : named_events(r.body)) {
    if (e["type"] == "content_block_start") started.push_back(e["index"]);
    if (e["type"] == "content_block_stop") stopped.push_back(e["index"]);
    if (e["type"] != "content_block_delta") continue;
    const json& d = e["delta"];
    if (d["type"] == "thinking_delta") thinking[e["index"]] += d["thinking"].get<std::string>();
    if (d["type"] == "text_delta") text[e["index"]] += d["text"].get<std::string>();
  }
  EXPECT_EQ(started, (std::vector<int>{0, 1}));
  EXPECT_EQ(stopped, (std::vector<int>{0, 1}));
  EXPECT_EQ(thinking[0], "Plan <tool_call> it.");
  EXPECT_EQ(text[1], "Done.");

  // A thinking block sent back is the turn's reasoning; `thinking` turns the template's switch.
  server_.reset();
  start("{% if messages[-1]['content'] == 'history' %}{{ messages[-2]['reasoning_content'] }}"
        "{% elif enable_thinking %}on{% else %}off{% endif %}END");
  body = {{"model", "fake-model"},
          {"max_tokens", 100},
          {"stop_sequences", {"END"}},
          {"messages",
           {{{"role", "user"}, {"content", "hi"}},
            {{"role", "assistant"},
             {"content", {{{"type", "thinking"}, {"thinking", "Be kind."}, {"signature", "x"}},
                          {{"type", "text"}, {"text", "Hello."}}}}},
            {{"role", "user"}, {"content", "history"}}}}};
  r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["content"][0]["text"], "Be kind.");
  body["messages"] = {{{"role", "user"}, {"content", "x"}}};
  body["thinking"] = {{"type", "disabled"}};
  r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  EXPECT_EQ(json::parse(r.body)["content"][0]["text"], "off") << r.body;
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  EXPECT_EQ(json::parse(r.body)["content"][0]["text"], "on") << r.body;
  body["thinking"] = {{"type", "maybe"}};
  r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST_F(ReasoningHttpTest, ResponsesHaveAReasoningItem) {
  start(kOpenTemplate);
  json body = {{"model", "fake-model"}, {"input", "Hmm.</think>Yes."}, {"max_output_tokens", 1000}};
  // The fake model stops at END only with a stop string, which /v1/responses has not: it runs to
  // the limit, so the reply is cut at the answer's end instead.
  body["max_output_tokens"] = static_cast<int>(std::string("Hmm.</think>Yes.").size());
  HttpResponse r = http_request(server_->port(), "POST", "/v1/responses", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json whole = json::parse(r.body);
  ASSERT_EQ(whole["output"].size(), 2u) << r.body;
  EXPECT_EQ(whole["output"][0]["type"], "reasoning");
  EXPECT_EQ(whole["output"][0]["content"][0], json({{"type", "reasoning_text"}, {"text", "Hmm."}}));
  EXPECT_EQ(whole["output"][1]["type"], "message");
  EXPECT_EQ(whole["output"][1]["content"][0]["text"], "Yes.");
  EXPECT_EQ(whole["usage"]["output_tokens_details"]["reasoning_tokens"], 12);

  body["stream"] = true;
  r = http_request(server_->port(), "POST", "/v1/responses", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  std::string reasoning, text;
  json final_output, final_usage;
  for (const json& e : named_events(r.body)) {
    if (e["type"] == "response.reasoning_text.delta") {
      EXPECT_EQ(e["output_index"], 0);
      reasoning += e["delta"].get<std::string>();
    }
    if (e["type"] == "response.output_text.delta") {
      EXPECT_EQ(e["output_index"], 1);
      text += e["delta"].get<std::string>();
    }
    if (e.contains("response") && e["response"]["status"] != "in_progress") {
      final_output = e["response"]["output"];
      final_usage = e["response"]["usage"];
    }
  }
  EXPECT_EQ(reasoning, "Hmm.");
  EXPECT_EQ(text, "Yes.");
  json want = whole["output"];
  for (size_t i = 0; i < want.size() && i < final_output.size(); ++i) {
    want[i].erase("id");  // ids differ per response
    final_output[i].erase("id");
  }
  EXPECT_EQ(final_output, want);
  EXPECT_EQ(final_usage["output_tokens_details"]["reasoning_tokens"], 12);

  // reasoning.effort reaches the template; a reasoning item sent back joins the assistant turn.
  server_.reset();
  start("{{ reasoning_effort }}|{{ messages[1]['reasoning_content'] }}|{{ messages[1]['content'] }}END");
  body = {{"model", "fake-model"},
          {"reasoning", {{"effort", "high"}}},
          {"max_output_tokens", 14},
          {"input",
           {{{"role", "user"}, {"content", "q"}},
            {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()},
             {"content", {{{"type", "reasoning_text"}, {"text", "Think."}}}}},
            {{"role", "assistant"}, {"content", "A."}},
            {{"role", "user"}, {"content", "q2"}}}}};
  r = http_request(server_->port(), "POST", "/v1/responses", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["output"][0]["content"][0]["text"], "high|Think.|A.");
}

// --- Reasoning budgets ---
// FakeEngine honours the mask: a forced token is inserted and the echo waits. So "abcdefghij"
// with a budget of 5, behind a prompt that opens the reasoning, becomes "abcde</think>fghij".

TEST_F(ReasoningHttpTest, ABudgetClosesTheReasoning) {
  start(kOpenTemplate);
  const json budget = {{"thinking_token_budget", 5}};
  json m = message("abcdefghij", budget);
  EXPECT_EQ(m["reasoning_content"], "abcde");
  EXPECT_EQ(m["content"], "fghij");
  EXPECT_EQ(m["finish_reason"], "stop");
  json s = reassemble(post(request("abcdefghij", true, budget)).body);
  EXPECT_EQ(s["reasoning_content"], "abcde");
  EXPECT_EQ(s["content"], "fghij");
  // The forced tag's 8 tokens count as reasoning, as a tag the model writes does. (No stop string:
  // the text held back for one would shift the count by its length.)
  const json usage = json::parse(post(request("abcdefghij", false,
                                              {{"thinking_token_budget", 5}, {"max_tokens", 18}, {"stop", json::array()}}))
                                     .body)["usage"];
  EXPECT_EQ(usage["completion_tokens_details"]["reasoning_tokens"], 13) << usage;
  EXPECT_EQ(usage["completion_tokens"], 18) << usage;  // abcde</think>fghij

  // Without a budget the reasoning runs on (to the stop string here).
  m = message("abcdefghij");
  EXPECT_EQ(m["reasoning_content"], "abcdefghij");
  EXPECT_EQ(m["content"], "");
  EXPECT_EQ(engine_->last_sampling().logit_mask, nullptr) << "no mask, so speculation stays on";
  // 0: closed before the first token.
  m = message("abcdefghij", {{"thinking_token_budget", 0}});
  EXPECT_EQ(m["reasoning_content"], "");
  EXPECT_EQ(m["content"], "abcdefghij");
}

TEST_F(ReasoningHttpTest, TheServersBudgetAndMessageUnlessARequestSetsItsOwn) {
  start(kThinkTemplate, "auto", [](ServerOptions& o) {
    o.reasoning_budget = 3;
    o.reasoning_budget_message = " Time is up.";
  });
  // The model writes its own <think>: the budget counts from after it.
  json m = message("<think>abcdefg</think>Answer.");
  EXPECT_EQ(m["reasoning_content"], "abc Time is up.");
  EXPECT_EQ(m["content"], "defg</think>Answer.");
  m = message("<think>abcdefg</think>Answer.", {{"thinking_token_budget", -1}});
  EXPECT_EQ(m["reasoning_content"], "abcdefg");
  EXPECT_EQ(m["content"], "Answer.");
  m = message("<think>ab</think>Answer.");
  EXPECT_EQ(m["reasoning_content"], "ab") << "closed within the budget: left alone";
  EXPECT_EQ(m["content"], "Answer.");
  // A reply that does not reason is not touched by a budget.
  m = message("An answer at once, no thinking here.");
  EXPECT_FALSE(m.contains("reasoning_content"));
  EXPECT_EQ(m["content"], "An answer at once, no thinking here.");
}

TEST_F(ReasoningHttpTest, BudgetsOnlyWhereTheModelReasons) {
  start(kPlainTemplate);
  json m = message("abcdefghij", {{"thinking_token_budget", 2}});
  EXPECT_EQ(m["content"], "abcdefghij");
  EXPECT_EQ(engine_->last_sampling().logit_mask, nullptr);
}

TEST_F(ReasoningHttpTest, BadBudgetsAreRefused) {
  start(kOpenTemplate);
  for (const json& bad : {json("5"), json(-2), json(1.5), json(true), json(int64_t{1} << 40)}) {
    HttpResponse r = post(request("abc", false, {{"thinking_token_budget", bad}}));
    EXPECT_EQ(r.status, 400) << bad.dump();
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "thinking_token_budget") << r.body;
  }
  json body = {{"model", "fake-model"},
               {"max_tokens", 100},
               {"messages", {{{"role", "user"}, {"content", "abc"}}}},
               {"thinking", {{"type", "enabled"}, {"budget_tokens", -1}}}};
  HttpResponse r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("budget_tokens"), std::string::npos) << r.body;
}

TEST_F(ReasoningHttpTest, AnthropicBudgetTokensAreEnforced) {
  start(kOpenTemplate);
  json body = {{"model", "fake-model"},
               {"max_tokens", 1000},
               {"stop_sequences", {"END"}},
               {"messages", {{{"role", "user"}, {"content", "abcdefghij"}}}},
               {"thinking", {{"type", "enabled"}, {"budget_tokens", 4}}}};
  HttpResponse r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json msg = json::parse(r.body);
  ASSERT_EQ(msg["content"].size(), 2u) << r.body;
  EXPECT_EQ(msg["content"][0]["thinking"], "abcd");
  EXPECT_EQ(msg["content"][1]["text"], "efghij");
  // Disabled, with a template that opens the reasoning anyway: closed at once.
  body["thinking"] = {{"type", "disabled"}};
  r = http_request(server_->port(), "POST", "/v1/messages", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  msg = json::parse(r.body);
  std::string text;
  for (const json& b : msg["content"]) {
    if (b["type"] == "thinking") EXPECT_EQ(b["thinking"], "") << r.body;
    if (b["type"] == "text") text += b["text"].get<std::string>();
  }
  EXPECT_EQ(text, "abcdefghij");
}

// --- ReasoningMask ---

const ReasoningTags kTags{"<think>", "</think>"};

// Bans token 0 and records what it was given.
class BanZero : public LogitMask {
 public:
  void apply(float* logits, int32_t) override { logits[0] = -1e30f; }
  void accept(int32_t token) override { accepted.push_back(token); }
  std::vector<int32_t> accepted;
};

TEST(ReasoningMaskTest, AppliesTheInnerMaskFromTheTokenAfterTheCloseTag) {
  // Tokens: 0 "x", 1 "</", 2 "think>", 3 "</think>", 4 " ".
  const std::vector<std::string> pieces = {"x", "</", "think>", "</think>", " "};
  auto piece = [&](int32_t id) { return pieces[id]; };
  auto check = [&](const std::vector<int32_t>& before, int32_t closing) {
    auto inner = std::make_shared<BanZero>();
    ReasoningMask mask(inner, kTags, piece, /*inside=*/true);
    float logits[5] = {};
    for (int32_t t : before) {
      mask.apply(logits, 5);
      EXPECT_EQ(logits[0], 0.0f) << "masked while reasoning";
      mask.accept(t);
    }
    EXPECT_FALSE(mask.reasoning_done());
    mask.accept(closing);
    EXPECT_TRUE(mask.reasoning_done());
    EXPECT_TRUE(inner->accepted.empty()) << "the reasoning's tokens are not the grammar's";
    mask.apply(logits, 5);
    EXPECT_LT(logits[0], -1e29f);
    mask.accept(4);
    EXPECT_EQ(inner->accepted, std::vector<int32_t>{4});
  };
  check({0, 4, 0}, 3);        // one token is the tag
  check({0, 0, 1}, 2);        // the tag across two tokens
  check({1, 4, 0, 1, 0}, 3);  // a half tag earlier does not count
}

// Without an opened prompt: the first token may be the open tag (token 5 here) besides what the
// inner mask allows; taking it starts the reasoning, taking anything else starts the answer.
TEST(ReasoningMaskTest, TheFirstTokenMayOpenTheReasoning) {
  const std::vector<std::string> pieces = {"x", "</", "think>", "</think>", " ", "<think>"};
  auto piece = [&](int32_t id) { return pieces[id]; };
  class BanZeroAndOpen : public BanZero {
   public:
    void apply(float* logits, int32_t vocab) override {
      BanZero::apply(logits, vocab);
      logits[5] = -1e30f;  // a grammar never allows the tag itself
    }
  };
  {
    auto inner = std::make_shared<BanZeroAndOpen>();
    ReasoningMask mask(inner, kTags, piece, /*inside=*/false, /*open_token=*/5);
    float logits[6] = {};
    mask.apply(logits, 6);
    EXPECT_LT(logits[0], -1e29f) << "the constraint applies to the first token";
    EXPECT_EQ(logits[5], 0.0f) << "except that it may open the reasoning";
    mask.accept(5);
    std::fill(logits, logits + 6, 0.0f);
    mask.apply(logits, 6);
    EXPECT_EQ(logits[0], 0.0f) << "free while reasoning";
    mask.accept(0);
    mask.accept(3);
    EXPECT_TRUE(mask.reasoning_done());
    mask.apply(logits, 6);
    EXPECT_LT(logits[0], -1e29f);
    EXPECT_TRUE(inner->accepted.empty());
  }
  {
    auto inner = std::make_shared<BanZeroAndOpen>();
    ReasoningMask mask(inner, kTags, piece, /*inside=*/false, /*open_token=*/5);
    mask.accept(4);  // an answer at once
    EXPECT_TRUE(mask.reasoning_done());
    EXPECT_EQ(inner->accepted, std::vector<int32_t>{4});
    float logits[6] = {};
    mask.apply(logits, 6);
    EXPECT_LT(logits[5], -1e29f) << "the tag is not allowed later";
  }
  {
    // No open token and not inside: the inner mask, unchanged.
    auto inner = std::make_shared<BanZeroAndOpen>();
    ReasoningMask mask(inner, kTags, piece, /*inside=*/false);
    EXPECT_TRUE(mask.reasoning_done());
    float logits[6] = {};
    mask.apply(logits, 6);
    EXPECT_LT(logits[5], -1e29f);
  }
}

// The budget: after N tokens of reasoning the close tag is forced, token by token, and the
// answer (with the inner mask) follows. Tokens: 0 "x", 1 "</", 2 "think>", 3 "</think>", 4 " ",
// 5 "<think>", 6 "Stop.", 7 "<".
class BudgetTest : public ::testing::Test {
 protected:
  const std::vector<std::string> pieces = {"x", "</", "think>", "</think>", " ", "<think>", "Stop.", "<"};
  std::function<std::string(int32_t)> piece = [this](int32_t id) { return pieces[id]; };
  // A toy tokenizer: the longest piece first.
  std::function<std::vector<int32_t>(const std::string&)> tokenize = [this](const std::string& text) {
    std::vector<int32_t> ids;
    for (size_t at = 0; at < text.size();) {
      int32_t best = -1;
      for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
        if (text.compare(at, pieces[id].size(), pieces[id]) == 0 &&
            (best < 0 || pieces[id].size() > pieces[best].size()))
          best = id;
      }
      if (best < 0) return std::vector<int32_t>{};  // not writable in this vocabulary
      ids.push_back(best);
      at += pieces[best].size();
    }
    return ids;
  };
  // A mask without a grammar and a budget of `tokens` (then `message` and </think>).
  ReasoningMask budgeted(int32_t tokens, const std::string& message = "", bool inside = true) const {
    return ReasoningMask(nullptr, kTags, piece, inside, -1, make_reasoning_budget(tokens, message, "</think>", tokenize));
  }
  // Which token the mask leaves (the only one not -inf), or -1 when it leaves more than one.
  static int32_t forced(LogitMask& mask) {
    float logits[8] = {};
    mask.apply(logits, 8);
    int32_t only = -1, allowed = 0;
    for (int32_t i = 0; i < 8; ++i) {
      if (logits[i] > -1e29f) {
        only = i;
        ++allowed;
      }
    }
    return allowed == 1 ? only : -1;
  }
};

TEST_F(BudgetTest, TheCloseTagIsForcedWhenTheBudgetIsSpent) {
  ReasoningMask mask = budgeted(3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(forced(mask), -1) << "free while the budget lasts, token " << i;
    mask.accept(0);
  }
  EXPECT_TRUE(mask.budget_spent());
  EXPECT_EQ(forced(mask), 3);
  mask.accept(3);
  EXPECT_TRUE(mask.reasoning_done());
  EXPECT_EQ(forced(mask), -1) << "the answer is free";
}

TEST_F(BudgetTest, TheMessageComesFirstAndTheInnerMaskAfter) {
  auto inner = std::make_shared<BanZero>();
  ReasoningMask mask(inner, kTags, piece, /*inside=*/true, -1, make_reasoning_budget(1, " Stop.", "</think>", tokenize));
  mask.accept(0);
  for (int32_t want : {4, 6, 3}) {
    EXPECT_FALSE(mask.reasoning_done());
    ASSERT_EQ(forced(mask), want);
    mask.accept(want);
  }
  EXPECT_TRUE(mask.reasoning_done());
  EXPECT_TRUE(inner->accepted.empty());
  float logits[8] = {};
  mask.apply(logits, 8);
  EXPECT_LT(logits[0], -1e29f);
  mask.accept(4);
  EXPECT_EQ(inner->accepted, std::vector<int32_t>{4});
}

TEST_F(BudgetTest, ATagTheModelBeganIsFinishedNotRestarted) {
  // "</" at the budget: only "think>" follows, not the message and a second "</think>".
  ReasoningMask mask = budgeted(2, " Stop.");
  mask.accept(0);
  mask.accept(1);
  EXPECT_EQ(forced(mask), 2);
  mask.accept(2);
  EXPECT_TRUE(mask.reasoning_done());
}

TEST_F(BudgetTest, ATagThatCannotBeFinishedIsWrittenWhole) {
  // "<" at the budget: "/think>" has no tokens here, so the message and the whole tag follow.
  ReasoningMask mask = budgeted(1, " Stop.");
  mask.accept(7);
  for (int32_t want : {4, 6, 3}) {
    ASSERT_EQ(forced(mask), want);
    mask.accept(want);
  }
  EXPECT_TRUE(mask.reasoning_done());
}

TEST_F(BudgetTest, AReasoningThatClosesWithinTheBudgetIsLeftAlone) {
  ReasoningMask mask = budgeted(3);
  mask.accept(0);
  mask.accept(1);
  mask.accept(2);  // "</" "think>": closed by the model at the third token
  EXPECT_TRUE(mask.reasoning_done());
  EXPECT_FALSE(mask.budget_spent());
  EXPECT_EQ(forced(mask), -1);
  mask.accept(0);
  mask.accept(0);
  EXPECT_EQ(forced(mask), -1) << "the answer has no budget";
}

TEST_F(BudgetTest, ZeroClosesAtOnce) {
  ReasoningMask mask = budgeted(0);
  EXPECT_TRUE(mask.budget_spent());
  EXPECT_EQ(forced(mask), 3);
  mask.accept(3);
  EXPECT_TRUE(mask.reasoning_done());
}

TEST_F(BudgetTest, WithoutAGrammarTheReplyIsWatchedForTheOpenTag) {
  {
    // Whitespace, then the open tag: the budget counts from after it.
    ReasoningMask mask = budgeted(2, "", /*inside=*/false);
    mask.accept(4);
    EXPECT_FALSE(mask.reasoning_done()) << "whitespace decides nothing";
    mask.accept(5);
    mask.accept(0);
    EXPECT_EQ(forced(mask), -1);
    mask.accept(0);
    EXPECT_EQ(forced(mask), 3);
  }
  {
    // "<" may begin the tag; "x" after it makes the reply an answer: no budget applies.
    ReasoningMask mask = budgeted(1, "", /*inside=*/false);
    mask.accept(7);
    EXPECT_FALSE(mask.reasoning_done());
    mask.accept(0);
    EXPECT_TRUE(mask.reasoning_done());
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(forced(mask), -1);
      mask.accept(0);
    }
    EXPECT_FALSE(mask.budget_spent());
  }
  {
    // Text first: an answer, whatever follows.
    ReasoningMask mask = budgeted(1, "", /*inside=*/false);
    mask.accept(6);
    EXPECT_TRUE(mask.reasoning_done());
    mask.accept(5);
    mask.accept(0);
    EXPECT_EQ(forced(mask), -1);
  }
}

TEST_F(BudgetTest, WithAGrammarTheOneTokenOpenTagStartsTheBudget) {
  auto inner = std::make_shared<BanZero>();
  ReasoningMask mask(inner, kTags, piece, /*inside=*/false, /*open_token=*/5,
                     make_reasoning_budget(1, "", "</think>", tokenize));
  mask.accept(5);
  EXPECT_EQ(forced(mask), -1);
  mask.accept(0);
  EXPECT_EQ(forced(mask), 3);
  mask.accept(3);
  EXPECT_TRUE(mask.reasoning_done());
  EXPECT_TRUE(inner->accepted.empty());
}

}  // namespace
}  // namespace hz
