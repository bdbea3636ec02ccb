// The transport-free pieces of the server: request parsing/validation, text hygiene, auth, the
// default chat prompt, response assembly and the Prometheus rendering.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "server/auth.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/sse.h"
#include "server/text_hygiene.h"

namespace hz {
namespace {

using nlohmann::json;

std::optional<ApiError> parse(ApiKind kind, const std::string& body, ParsedRequest* out, bool normalize = false) {
  ParseOptions o;
  o.normalize_newlines = normalize;
  return parse_request(kind, body, o, out);
}

TEST(TextHygieneTest, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(is_valid_utf8("\xFF"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation
}

TEST(TextHygieneTest, CleansAndNamesTheField) {
  std::string s = "\xEF\xBB\xBFhi\r\nthere";
  ASSERT_TRUE(clean_request_text(s, "prompt", true).ok());
  EXPECT_EQ(s, "hi\nthere");
  s = "a\r\nb";
  ASSERT_TRUE(clean_request_text(s, "prompt", false).ok());
  EXPECT_EQ(s, "a\r\nb");
  s = std::string("a\0b", 3);
  Status st = clean_request_text(s, "messages[2].content", false);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("messages[2].content"), std::string::npos);
  s = "bad\xFE";
  EXPECT_NE(clean_request_text(s, "stop[0]", false).message().find("stop[0]"), std::string::npos);
}

TEST(AuthTest, BearerAndConstantTimeCompare) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal("abcd", "abc"));
  EXPECT_FALSE(constant_time_equal("", "abc"));
  EXPECT_TRUE(is_authorized("", ""));  // auth off
  EXPECT_TRUE(is_authorized("Bearer k1", "k1"));
  EXPECT_TRUE(is_authorized("bearer k1 ", "k1"));
  EXPECT_FALSE(is_authorized("Bearer k2", "k1"));
  EXPECT_FALSE(is_authorized("k1", "k1"));
  EXPECT_FALSE(is_authorized("", "k1"));
}

TEST(OpenAiRequestTest, ParsesCompletionFields) {
  ParsedRequest r;
  auto e = parse(ApiKind::kCompletion, R"({"model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5,
      "top_p": 0.9, "top_k": 40, "min_p": 0.1, "presence_penalty": 0.5, "frequency_penalty": -0.5,
      "repetition_penalty": 1.1, "seed": 42, "stop": "x", "logprobs": 3, "stream": true,
      "stream_options": {"include_usage": true}, "user": "u", "metadata": {"k": "v"}, "store": false,
      "service_tier": "auto", "parallel_tool_calls": true})",
                 &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.sampling.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_set);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.user, "u");
}

TEST(OpenAiRequestTest, NullsAreAbsentAndDefaultsHold) {
  ParsedRequest r;
  auto e = parse(ApiKind::kCompletion, R"({"prompt": "a", "max_tokens": null, "temperature": null, "stop": null,
      "seed": null, "logprobs": null, "top_k": -1})",
                 &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_FALSE(r.max_tokens_set);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.sampling.seed);
  EXPECT_FALSE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_k, 0);
}

TEST(OpenAiRequestTest, PromptForms) {
  ParsedRequest r;
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt": [1, 2, 3]})", &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt": [[4, 5]]})", &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{4, 5}));
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt": ["one"]})", &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "one");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": [1, -2]})", &r)->param, "prompt[1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": [1, 1.5]})", &r)->param, "prompt[1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": []})", &r)->param, "prompt");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": [1, 99999999999]})", &r)->param, "prompt[1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": {"a": 1}})", &r)->param, "prompt");
}

// A batch: texts or token id lists, one kind; each prompt checked and named by its index; the
// prompts times n bounded.
TEST(OpenAiRequestTest, BatchedPrompts) {
  ParsedRequest r;
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt": ["a", "b", "c"], "n": 2})", &r));
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[2].text, "c");
  EXPECT_FALSE(r.prompts[1].is_tokens);
  EXPECT_EQ(r.n, 2);
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt": [[1, 2], [3]]})", &r));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.prompts[1].is_tokens);
  EXPECT_EQ(r.prompts[1].tokens, (std::vector<int32_t>{3}));
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": ["a", [1]]})", &r)->param, "prompt[1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": [[1], "a"]})", &r)->param, "prompt[1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": [[1], []]})", &r)->param, "prompt[1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": [[1], [2, -1]]})", &r)->param, "prompt[1][1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, "{\"prompt\": [\"a\", \"b\xff\"]}", &r)->param, "prompt[1]");
  EXPECT_EQ(parse(ApiKind::kCompletion, R"({"prompt": ["a", 7]})", &r)->param, "prompt[1]");
  // 64 prompts with n = 2 fit (128 sequences), with n = 3 they do not.
  std::string batch = "[";
  for (int i = 0; i < 64; ++i) batch += (i ? ", \"p" : "\"p") + std::to_string(i) + "\"";
  batch += "]";
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"n": 2, "prompt": )" + batch + "}", &r));
  EXPECT_EQ(r.prompts.size(), 64u);
  auto e = parse(ApiKind::kCompletion, R"({"n": 3, "prompt": )" + batch + "}", &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "prompt");
  EXPECT_NE(e->message.find("at most 128"), std::string::npos) << e->message;
}

TEST(OpenAiRequestTest, ChatFields) {
  ParsedRequest r;
  auto e = parse(ApiKind::kChat, R"({"messages": [{"role": "developer", "content": "\ufeffbe nice\r\n"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}], "max_tokens": 3, "max_completion_tokens": 5,
      "logprobs": true, "top_logprobs": 2})",
                 &r, /*normalize=*/true);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].content, "be nice\n");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.sampling.max_tokens, 5);  // max_completion_tokens wins
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
}

TEST(OpenAiRequestTest, ErrorsNameTheField) {
  struct Case {
    ApiKind kind;
    std::string body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {ApiKind::kChat, R"({"messages": "hi"})", "messages"},
      {ApiKind::kChat, R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {ApiKind::kChat, R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {ApiKind::kChat, R"({"messages": [1]})", "messages[0]"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": 3}]})", "messages[0].content"},
      {ApiKind::kChat, "{\"messages\": [{\"role\": \"user\", \"content\": \"ok\"}, {\"role\": \"user\", "
                       "\"content\": [{\"type\": \"text\", \"text\": \"x\xC3\"}]}]}",
       "messages[1].content[0].text"},
      {ApiKind::kCompletion, R"({"prompt": "a", "stop": ["ok", "a\u0000"]})", "stop[1]"},
      {ApiKind::kCompletion, R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options.include_usage"},
      {ApiKind::kCompletion, R"({"prompt": "a", "stream": true, "stream_options": []})", "stream_options"},
      {ApiKind::kCompletion, R"({"prompt": "a", "skip_special_tokens": false})", "skip_special_tokens"},
      {ApiKind::kCompletion, R"({"prompt": "a", "min_tokens": -1})", "min_tokens"},
      {ApiKind::kCompletion, R"({"prompt": "a", "cache_prompt": "yes"})", "cache_prompt"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})", "chat_template_kwargs"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"tools": []}})",
       "chat_template_kwargs.tools"},
      {ApiKind::kCompletion, R"({"prompt": "a", "chat_template_kwargs": {}})", "chat_template_kwargs"},
      // Only with stream (as OpenAI and vLLM answer).
      {ApiKind::kCompletion, R"({"prompt": "a", "stream_options": {"include_usage": true}})", "stream_options"},
      {ApiKind::kCompletion, R"({"prompt": "a", "temperature": 2.5})", "temperature"},
      {ApiKind::kCompletion, R"({"prompt": "a", "repetition_penalty": 0})", "repetition_penalty"},
      {ApiKind::kCompletion, R"({"prompt": "a", "logprobs": 21})", "logprobs"},
      {ApiKind::kCompletion, R"({"prompt": "a", "logprobs": true})", "logprobs"},
      {ApiKind::kCompletion, R"({"prompt": "a", "n": 0})", "n"},
      {ApiKind::kCompletion, R"({"prompt": "a", "best_of": 3})", "best_of"},
      {ApiKind::kCompletion, R"({"prompt": "a", "n": 65})", "n"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "n": 0})", "n"},
      {ApiKind::kCompletion, R"({"prompt": "a", "echo": 1})", "echo"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "echo": true})", "echo"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 0})", "max_tokens"},
      {ApiKind::kCompletion, R"({"prompt": "a", "seed": "7"})", "seed"},
      {ApiKind::kCompletion, R"({"prompt": "a", "model": 7})", "model"},
      {ApiKind::kCompletion, R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},
      {ApiKind::kCompletion, R"({"prompt": "a", "max_tokens": 99999999999})", "max_tokens"},
      {ApiKind::kCompletion, R"({"prompt": "a", "stop_token_ids": [1, "x"]})", "stop_token_ids[1]"},
      {ApiKind::kCompletion, R"({"prompt": "a", "frobnicate": 1})", "frobnicate"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": {}})", "tools"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "code"}]})", "tools[0].type"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "a b"}}]})", "tools[0].function.name"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})", "tools[0].function.parameters"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f", "x": 3}}]})", "tools[0].function.x"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tool_choice": "auto"})", "tool_choice"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})", "tool_choice"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always"})", "tool_choice"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": 1})", "parallel_tool_calls"},
      {ApiKind::kChat, R"({"messages": [{"role": "tool", "content": "a"}]})", "messages[0].tool_call_id"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a", "tool_calls": []}]})", "messages[0].tool_calls"},
      {ApiKind::kChat, R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 1}}]}]})", "messages[0].tool_calls[0].function.arguments"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "functions": []})", "functions"},
      {ApiKind::kCompletion, R"({"prompt": "a", "tools": []})", "tools"},
      {ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "suffix": "x"})", "suffix"},
      {ApiKind::kCompletion, R"({"prompt": "a", "suffix": "x"})", "suffix"},
      {ApiKind::kCompletion, R"({"prompt": "a", "logit_bias": {"5": 101}})", "logit_bias[5]"},
      {ApiKind::kCompletion, R"({"prompt": "a", "logit_bias": {"x": 1}})", "logit_bias"},
      {ApiKind::kCompletion, R"({"prompt": "a", "logit_bias": [1]})", "logit_bias"},
      {ApiKind::kCompletion, R"({"prompt": "a", "grammar": 3})", "grammar"},
      {ApiKind::kCompletion, R"({"prompt": "a", "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})", "grammar"},
      {ApiKind::kCompletion, R"({"prompt": "a", "response_format": {"type": "xml"}})", "response_format.type"},
      {ApiKind::kCompletion, R"({"prompt": "a", "response_format": {"type": "json_schema"}})", "response_format.json_schema"},
      {ApiKind::kCompletion, R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "\\bx"}}}})", "response_format.json_schema.schema"},
  };
  for (const Case& c : cases) {
    ParsedRequest r;
    auto e = parse(c.kind, c.body, &r);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
  }
}

TEST(OpenAiRequestTest, UnknownFieldsAndUnsupportedKeywordsAreNamed) {
  ParsedRequest r;
  auto e = parse(ApiKind::kCompletion, R"({"prompt": "a", "frobnicate": 1})", &r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("'frobnicate'"), std::string::npos);
  e = parse(ApiKind::kCompletion,
            R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "format": "hostname"}}}})",
            &r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("format 'hostname'"), std::string::npos) << e->message;
}

TEST(OpenAiRequestTest, ParsesLogitBiasAndConstraints) {
  ParsedRequest r;
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt": "a", "logit_bias": {"7": 100, "9": -2.5}})", &r));
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampling.logit_bias[0], std::make_pair(int32_t{7}, 100.0f));
  EXPECT_EQ(r.sampling.logit_bias[1], std::make_pair(int32_t{9}, -2.5f));
  ASSERT_FALSE(parse(ApiKind::kCompletion, R"({"prompt": "a", "grammar": "root ::= \"x\""})", &r));
  EXPECT_EQ(r.grammar_text, "root ::= \"x\"");
  EXPECT_EQ(r.grammar_field, "grammar");
  ASSERT_FALSE(parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_object"}})", &r));
  EXPECT_NE(r.grammar_text.find("json-object"), std::string::npos);
  ASSERT_FALSE(parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "text"}})", &r));
  EXPECT_TRUE(r.grammar_text.empty());
  // Properties keep the order the client wrote ("b" before "a").
  ASSERT_FALSE(parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_schema",
      "json_schema": {"name": "n", "strict": true, "schema": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
      "required": ["b", "a"], "additionalProperties": false}}}})", &r));
  auto g = grammar::Grammar::parse(r.grammar_text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(g->accepts(R"({"b": "x", "a": 1})"));
  EXPECT_FALSE(g->accepts(R"({"a": 1, "b": "x"})"));
}

TEST(OpenAiRequestTest, InvalidUtf8OutsideTextsIsStillRefused) {
  ParsedRequest r;
  auto e = parse(ApiKind::kCompletion, "{\"prompt\": \"ok\", \"model\": \"\xFF\"}", &r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("UTF-8"), std::string::npos);
  e = parse(ApiKind::kCompletion, "{\"prompt\": \"ok\", \"\xFF\": 1}", &r);
  ASSERT_TRUE(e);
}

TEST(OpenAiRequestTest, DeepNestingIsRefusedWithoutRecursion) {
  ParsedRequest r;
  std::string deep = "{\"prompt\": \"a\", \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto e = parse(ApiKind::kCompletion, deep, &r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("nests deeper"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_FALSE(parse(ApiKind::kCompletion, "{\"prompt\": \"" + std::string(1000, '[') + "\"}", &r));
}

// Fields vLLM and llama-server clients send: min_tokens reaches the sampler, cache_prompt and
// skip_special_tokens: true describe what the server does, chat_template_kwargs reach the template.
TEST(OpenAiRequestTest, VllmAndLlamaServerExtras) {
  ParsedRequest r;
  auto e = parse(ApiKind::kChat, R"({"messages": [{"role": "user", "content": "x"}], "min_tokens": 5, "cache_prompt": false,
      "skip_special_tokens": true, "chat_template_kwargs": {"enable_thinking": false, "style": {"a": 1}}})",
                 &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.sampling.min_tokens, 5);
  EXPECT_EQ(r.template_kwargs.dump(), R"({"enable_thinking":false,"style":{"a":1}})");
  ModelInfo info;
  info.chat_template = "{% if enable_thinking is defined and not enable_thinking %}NO-THINK {% endif %}"
                       "{% for m in messages %}{{ m.content }}{% endfor %}";
  auto p = render_chat_prompt(info, r.messages, {}, {}, r.template_kwargs);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->text, "NO-THINK x");
  p = render_chat_prompt(info, r.messages);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->text, "x");
}

TEST(ChatPromptTest, DefaultTemplateIsChatMl) {
  std::vector<ChatMessage> m = {{"developer", "D"}, {"user", "U"}, {"assistant", "A"}};
  ModelInfo info;
  auto r = render_chat_prompt(info, m);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text,
            "<|im_start|>system\nD<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_TRUE(r->add_special);
}

GenerationEvent tokens(std::string text, int n) {
  GenerationEvent e;
  e.text = std::move(text);
  for (int i = 0; i < n; ++i) e.token_ids.push_back(10 + i);
  return e;
}

GenerationEvent finished(FinishReason reason, int prompt, int completion) {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::kFinished;
  e.finish_reason = reason;
  e.prompt_tokens = prompt;
  e.completion_tokens = completion;
  e.cached_tokens = 1;
  return e;
}

TEST(CompletionAssemblerTest, ChatStreamChunks) {
  ResponseContext ctx{ApiKind::kChat, "chatcmpl-1", 123, "m", true, true, false, 0};
  CompletionAssembler a(ctx);
  std::string start = a.stream_start();
  ASSERT_EQ(start.rfind("data: ", 0), 0u);
  ASSERT_EQ(start.substr(start.size() - 2), "\n\n");
  json first = json::parse(start.substr(6));
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["usage"].is_null());
  EXPECT_EQ(a.stream_tokens(tokens("", 1)), "");  // nothing to say while text is held back
  json c = json::parse(a.stream_tokens(tokens("Hi\n", 2)).substr(6));
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "Hi\n");
  EXPECT_EQ(c["created"], 123);
  std::string end = a.stream_finish(finished(FinishReason::kStop, 5, 3));
  std::vector<std::string> parts;
  for (size_t p = 0; p < end.size();) {
    size_t q = end.find("\n\n", p);
    parts.push_back(end.substr(p + 6, q - p - 6));
    p = q + 2;
  }
  ASSERT_EQ(parts.size(), 3u);
  json fin = json::parse(parts[0]);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(fin["choices"][0]["delta"].empty());
  json usage = json::parse(parts[1]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 8);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
  EXPECT_EQ(parts[2], "[DONE]");
}

TEST(CompletionAssemblerTest, FinalBodiesAndFinishReasons) {
  ResponseContext ctx{ApiKind::kCompletion, "cmpl-1", 1, "m", false, false, false, 0};
  CompletionAssembler a(ctx);
  a.add_tokens(tokens("ab", 2));
  a.add_tokens(tokens("c", 1));
  json j = json::parse(a.final_body(finished(FinishReason::kTimeout, 2, 3)));
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");  // timeouts read as cut output
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_FALSE(finish_error(finished(FinishReason::kLength, 1, 1)));
  EXPECT_EQ(finish_error(finished(FinishReason::kCancelled, 1, 1))->http_status, 503);
  EXPECT_EQ(finish_error(finished(FinishReason::kError, 1, 1))->http_status, 500);
}

// n choices: each choice's chunks and body carry its index, tool call ids differ between choices,
// the merged body carries the usage it is given (the server sums it).
TEST(CompletionAssemblerTest, SeveralChoicesCarryTheirIndexAndOwnToolCallIds) {
  const std::string reply = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  ResponseContext base{ApiKind::kChat, "chatcmpl-0123456789abcdef01234567", 1, "m", false, true, false, 0};
  base.tool_format = ToolCallFormat::kHermes;
  std::vector<std::unique_ptr<CompletionAssembler>> parts;
  std::vector<GenerationEvent> events;
  for (int i = 0; i < 3; ++i) {
    ResponseContext ctx = base;
    ctx.choice_index = i;
    ctx.num_choices = 3;
    parts.push_back(std::make_unique<CompletionAssembler>(ctx));
    parts.back()->add_tokens(tokens(reply, 9));
    events.push_back(finished(FinishReason::kStop, 4, 9 + i));
  }
  std::vector<const CompletionAssembler*> ptrs;
  std::vector<const GenerationEvent*> evs;
  for (int i = 0; i < 3; ++i) {
    ptrs.push_back(parts[i].get());
    evs.push_back(&events[i]);
  }
  GenerationEvent usage = finished(FinishReason::kStop, 4, 30);
  json j = json::parse(CompletionAssembler::merged_body(ptrs, evs, usage));
  ASSERT_EQ(j["choices"].size(), 3u);
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["finish_reason"], "tool_calls");
    ids.insert(j["choices"][i]["message"]["tool_calls"][0]["id"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 30);
  EXPECT_EQ(j["usage"]["total_tokens"], 34);

  // Streamed: a choice's chunks carry its index; stream_finish_choice ends only that choice, and
  // stream_end adds the usage chunk and [DONE].
  ResponseContext sctx{ApiKind::kCompletion, "cmpl-1", 1, "m", true, true, false, 0};
  sctx.choice_index = 2;
  sctx.num_choices = 3;
  CompletionAssembler s(sctx);
  json c = json::parse(s.stream_tokens(tokens("ab", 2)).substr(6));
  EXPECT_EQ(c["choices"][0]["index"], 2);
  const std::string fin = s.stream_finish_choice(finished(FinishReason::kLength, 4, 2));
  EXPECT_EQ(fin.find("[DONE]"), std::string::npos);
  EXPECT_EQ(json::parse(fin.substr(6))["choices"][0]["index"], 2);
  const std::string end = s.stream_end(finished(FinishReason::kLength, 4, 6));
  EXPECT_NE(end.find("\"completion_tokens\":6"), std::string::npos) << end;
  EXPECT_EQ(end.substr(end.size() - 14), "data: [DONE]\n\n");
}

// parallel_tool_calls: false keeps the first call of a reply that holds two, in every shape.
TEST(CompletionAssemblerTest, ParallelToolCallsFalseKeepsTheFirstCall) {
  const std::string reply =
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
  auto calls_in_body = [&](bool parallel, bool anthropic) {
    ResponseContext ctx{ApiKind::kChat, "chatcmpl-1", 1, "m", false, false, false, 0};
    ctx.tool_format = ToolCallFormat::kHermes;
    ctx.parallel_tool_calls = parallel;
    ctx.shape = anthropic ? ReplyShape::kAnthropic : ReplyShape::kOpenAi;
    CompletionAssembler a(ctx);
    a.add_tokens(tokens(reply, 9));
    json j = json::parse(a.final_body(finished(FinishReason::kStop, 2, 9)));
    if (anthropic) return j["content"];
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    return j["choices"][0]["message"]["tool_calls"];
  };
  EXPECT_EQ(calls_in_body(true, false).size(), 2u);
  json one = calls_in_body(false, false);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["function"]["name"], "f");
  EXPECT_EQ(calls_in_body(true, true).size(), 2u);
  json blocks = calls_in_body(false, true);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0]["name"], "f");

  // Streamed: one call's deltas (index 0 only).
  ResponseContext ctx{ApiKind::kChat, "chatcmpl-1", 1, "m", true, false, false, 0};
  ctx.tool_format = ToolCallFormat::kHermes;
  ctx.parallel_tool_calls = false;
  CompletionAssembler s(ctx);
  s.stream_start();
  std::string out = s.stream_tokens(tokens(reply, 9));
  out += s.stream_finish(finished(FinishReason::kStop, 2, 9));
  EXPECT_NE(out.find("\"name\":\"f\""), std::string::npos) << out;
  EXPECT_EQ(out.find("\"name\":\"g\""), std::string::npos) << out;
  EXPECT_EQ(out.find("\"index\":1"), std::string::npos) << out;
}

TEST(CompletionAssemblerTest, TopLogprobsKeepProbabilityOrder) {
  ResponseContext ctx{ApiKind::kCompletion, "cmpl-1", 1, "m", false, false, true, 3};
  CompletionAssembler a(ctx);
  GenerationEvent e = tokens("z", 1);
  e.chosen = {{5, "z", -0.1f}};
  // The sampler hands alternatives most probable first; "z" > "m" > "a" alphabetically reversed.
  e.top = {{{5, "z", -0.1f}, {6, "m", -1.5f}, {7, "a", -3.0f}}};
  a.add_tokens(e);
  const std::string body = a.final_body(finished(FinishReason::kLength, 1, 1));
  const size_t z = body.find("\"z\":"), m = body.find("\"m\":"), x = body.find("\"a\":");
  ASSERT_NE(z, std::string::npos) << body;
  EXPECT_LT(z, m) << body;
  EXPECT_LT(m, x) << body;
}

TEST(ApiErrorTest, SubmitStatusMapping) {
  EXPECT_EQ(api_error_from_status(Status(StatusCode::kResourceExhausted, "")).http_status, 429);
  EXPECT_EQ(api_error_from_status(Status(StatusCode::kResourceExhausted, "")).headers.at(0).first, "Retry-After");
  EXPECT_EQ(api_error_from_status(Status(StatusCode::kCancelled, "")).http_status, 503);
  EXPECT_EQ(api_error_from_status(out_of_range("x")).http_status, 400);
  EXPECT_EQ(api_error_from_status(invalid_argument("x")).http_status, 400);
  EXPECT_EQ(api_error_from_status(Status(StatusCode::kInternal, "x")).http_status, 500);
  json body = json::parse(api_error_body(bad_request("bad \xFF value", "p")));
  EXPECT_EQ(body["error"]["param"], "p");
  EXPECT_TRUE(body["error"]["code"].is_null());
}

TEST(MetricsTest, HistogramIsCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5, 2);
  h.observe(5);
  std::string out;
  h.render(out, "x_seconds", "help");
  EXPECT_NE(out.find("# TYPE x_seconds histogram"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_count 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_sum 6.05\n"), std::string::npos) << out;
}

TEST(MetricsTest, PrefixHitRate) {
  ServerMetrics m;
  EngineStats s;
  s.prefix_cache_queries = 4;
  s.prefix_cache_hits = 1;
  s.kv_blocks_cached = 7;
  std::string out = m.render(s);
  EXPECT_NE(out.find("horizon_prefix_cache_hit_rate 0.25\n"), std::string::npos) << out;
  EXPECT_NE(out.find("horizon_kv_blocks_cached 7\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace hz
