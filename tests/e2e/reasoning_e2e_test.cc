// Reasoning on a real model: `horizon serve` on stories260K with a chat template whose generation
// prompt opens the reasoning (as DeepSeek-R1's does). The story it tells is reasoning_content (it
// never writes </think>), streamed the same, and a json_object constraint waits for the reasoning
// to close: greedy reasoning is the same text with and without it, where a grammar applied at
// once would have forced a '{' into the reasoning.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/http_test_client.h"
#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

json post(const test::ServerProcess& srv, const json& body, int* status = nullptr) {
  std::string out;
  const int code = test::http_request("POST", srv.base_url() + "/v1/chat/completions", body.dump(), &out);
  if (status != nullptr) *status = code;
  EXPECT_EQ(code, 200) << out;
  return code == 200 && !body.value("stream", false) ? json::parse(out) : json{{"sse", out}};
}

TEST(ReasoningE2ETest, AStoryInsideTheReasoningAndAConstraintThatWaitsForIt) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--chat-template",
                           "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  const json base = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 24},
                     {"temperature", 0}};
  const json free = post(srv, base)["choices"][0];
  EXPECT_EQ(free["finish_reason"], "length");
  EXPECT_EQ(free["message"]["content"], "");
  const std::string reasoning = free["message"]["reasoning_content"];
  EXPECT_GT(reasoning.size(), 20u);
  EXPECT_NE(reasoning.find(" was "), std::string::npos) << reasoning;

  json constrained = base;
  constrained["response_format"] = {{"type", "json_object"}};
  const json c = post(srv, constrained)["choices"][0];
  EXPECT_EQ(c["message"]["reasoning_content"], reasoning);
  EXPECT_EQ(c["message"]["content"], "");

  json streamed = base;
  streamed["stream"] = true;
  std::string joined;
  for (const std::string& p : test::sse_payloads(post(srv, streamed)["sse"].get<std::string>())) {
    if (p == "[DONE]") break;
    const json d = json::parse(p)["choices"][0]["delta"];
    EXPECT_FALSE(d.contains("content") && !d["content"].get<std::string>().empty()) << p;
    if (d.contains("reasoning_content")) joined += d["reasoning_content"].get<std::string>();
  }
  EXPECT_EQ(joined, reasoning);
}

// A budget on a real model: greedy reasoning cut after N tokens is the first N tokens of the
// unbudgeted reasoning, the forced </think> (several tokens in this vocabulary) ends it, and the
// model goes on with an answer; the server's message lands inside the reasoning.
TEST(ReasoningE2ETest, ABudgetEndsTheReasoningAndTheModelAnswers) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--chat-template",
                           "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n", "--reasoning-budget-message",
                           " The end."});
  ASSERT_TRUE(srv.ok()) << srv.log();
  const json base = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}, {"temperature", 0}};
  json first = base;
  first["max_tokens"] = 8;
  const std::string head = post(srv, first)["choices"][0]["message"]["reasoning_content"];
  ASSERT_FALSE(head.empty());

  json budgeted = base;
  budgeted["max_tokens"] = 40;
  budgeted["thinking_token_budget"] = 8;
  const json reply = post(srv, budgeted);
  const json& m = reply["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], head + " The end.") << reply;
  const std::string content = m["content"];
  EXPECT_GT(content.size(), 10u) << reply;
  EXPECT_EQ(content.find("</think>"), std::string::npos) << reply;
  const int reasoning_tokens = reply["usage"]["completion_tokens_details"]["reasoning_tokens"];
  EXPECT_GT(reasoning_tokens, 8 + 2) << reply;  // the message and the tag are reasoning too
  EXPECT_LT(reasoning_tokens, 40) << reply;

  // Streamed: the same split.
  budgeted["stream"] = true;
  std::string reasoning, answer;
  for (const std::string& p : test::sse_payloads(post(srv, budgeted)["sse"].get<std::string>())) {
    if (p == "[DONE]") break;
    const json d = json::parse(p)["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content") && d["content"].is_string()) answer += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, m["reasoning_content"]);
  EXPECT_EQ(answer, content);

  // With a json_object constraint as well: the answer after the forced tag is the constrained one.
  json constrained = base;
  constrained["max_tokens"] = 60;
  constrained["thinking_token_budget"] = 8;
  constrained["response_format"] = {{"type", "json_object"}};
  const json c = post(srv, constrained)["choices"][0]["message"];
  EXPECT_EQ(c["reasoning_content"], head + " The end.");
  const std::string json_answer = c["content"];
  EXPECT_EQ(json_answer.find_first_not_of(" \n"), json_answer.find('{')) << c;
}

// Without reasoning in the template the same constraint applies from the first token.
TEST(ReasoningE2ETest, WithoutReasoningTheConstraintStartsAtOnce) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--chat-template",
                           "{% for m in messages %}{{ m.content }}{% endfor %}"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  const json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 24},
                     {"temperature", 0},
                     {"response_format", {{"type", "json_object"}}}};
  const json c = post(srv, body)["choices"][0];
  EXPECT_FALSE(c["message"].contains("reasoning_content"));
  const std::string content = c["message"]["content"];
  EXPECT_EQ(content.find_first_not_of(" \n"), content.find('{')) << c;
  EXPECT_NE(content.find('{'), std::string::npos) << c;
}

}  // namespace
}  // namespace hz
