// libFuzzer target for the request parsers/validators: any bytes as a /v1/completions,
// /v1/chat/completions, /v1/messages or /v1/responses body (the first byte picks which) must give a
// parsed request or a 400 naming a field, never a crash; accepted requests then go through chat
// rendering and response assembly in their API's shapes (as a reasoning model's reply too, whose
// reasoning split streamed must equal the split of the whole).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "base/check.h"
#include "chat/reasoning.h"
#include "server/anthropic.h"
#include "server/auth.h"
#include "server/chat_prompt.h"
#include "server/grammar_constraint.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/responses_api.h"
#include "server/text_hygiene.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using namespace hz;
  ApiKind kind = (data[0] & 1) ? ApiKind::kChat : ApiKind::kCompletion;
  hz::ParseOptions options;
  options.normalize_newlines = (data[0] & 2) != 0;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  // Anthropic's and the Responses API's bodies are translated to chat bodies first.
  ReplyShape shape = ReplyShape::kOpenAi;
  std::string translated, echo;
  if ((data[0] & 4) != 0) {
    kind = ApiKind::kChat;
    shape = (data[0] & 8) != 0 ? ReplyShape::kResponses : ReplyShape::kAnthropic;
    auto e = shape == ReplyShape::kResponses ? responses_to_chat_body(body, &translated, &echo)
                                             : anthropic_to_chat_body(body, &translated);
    if (e) {
      HZ_CHECK(e->http_status == 400 && !e->message.empty());
      return 0;
    }
    body = translated;
  }

  ParsedRequest request;
  auto error = parse_request(kind, body, options, &request);
  if (error) {
    HZ_CHECK(error->http_status == 400);
    HZ_CHECK(!error->message.empty());
    std::string json = api_error_body(*error);
    HZ_CHECK(!json.empty());
    return 0;
  }
  // Invariants of an accepted request.
  HZ_CHECK(request.sampling.max_tokens >= (request.echo ? 0 : 1));
  HZ_CHECK(kind == ApiKind::kCompletion || !request.echo);
  HZ_CHECK(request.sampling.top_logprobs >= 0 && request.sampling.top_logprobs <= 20);
  for (const auto& stop : request.sampling.stop) HZ_CHECK(!stop.empty() && is_valid_utf8(stop));
  if (kind == ApiKind::kChat) {
    HZ_CHECK(!request.messages.empty());
    for (const auto& m : request.messages) {
      HZ_CHECK(is_valid_utf8(m.content));
      HZ_CHECK(m.content.find('\0') == std::string::npos);
    }
    auto prompt = render_chat_prompt(ModelInfo(), request.messages);
    HZ_CHECK(prompt.ok() && is_valid_utf8(prompt->text));
  } else {
    HZ_CHECK(!request.prompts.empty());
    HZ_CHECK(static_cast<int64_t>(request.prompts.size()) * request.n <= kMaxRequestSequences);
    for (const auto& p : request.prompts) HZ_CHECK(p.is_tokens ? !p.tokens.empty() : is_valid_utf8(p.text));
  }

  // Echo the accepted texts back through the response assembler as if generated.
  ResponseContext ctx{kind, "id", 0, request.model, request.stream, request.include_usage, request.sampling.logprobs,
                      request.sampling.top_logprobs};
  ctx.shape = shape;
  ctx.echo = echo;
  const std::string prompt_text = kind == ApiKind::kChat ? request.messages.back().content : request.prompts[0].text;
  ctx.echo_prompt = request.echo;
  ctx.echo_text = prompt_text;
  if ((data[0] & 16) != 0 && kind == ApiKind::kChat) {
    // A reasoning model: the text as its reply, split whole and streamed in three pieces alike.
    ctx.reasoning = ReasoningTags{"<think>", "</think>"};
    ctx.reasoning_inside = (data[0] & 32) != 0;
    const ReasoningSplit whole = split_reasoning(prompt_text, *ctx.reasoning, ctx.reasoning_inside);
    ReasoningStream stream(*ctx.reasoning, ctx.reasoning_inside);
    std::string reasoning, content;
    const size_t a = prompt_text.size() / 3, b = 2 * prompt_text.size() / 3;
    for (std::string_view piece : {std::string_view(prompt_text).substr(0, a),
                                   std::string_view(prompt_text).substr(a, b - a),
                                   std::string_view(prompt_text).substr(b)}) {
      ReasoningStream::Delta d = stream.feed(piece);
      reasoning += d.reasoning;
      content += d.content;
    }
    ReasoningStream::Delta d = stream.finish();
    HZ_CHECK(reasoning + d.reasoning == whole.reasoning);
    HZ_CHECK(content + d.content == whole.content);
    if (request.thinking_token_budget && *request.thinking_token_budget >= 0) {
      // A reasoning budget over a byte-level "model" that wants to write the text: the reasoning
      // is closed no later than its budget plus the message and the tag.
      const int32_t budget = std::min(*request.thinking_token_budget, 1 << 16);
      const std::string message = " Stop.";
      auto bytes = [](const std::string& t) { return std::vector<int32_t>(t.begin(), t.end()); };
      auto piece = [](int32_t id) { return std::string(1, static_cast<char>(id)); };
      ReasoningMask mask(nullptr, *ctx.reasoning, piece, ctx.reasoning_inside, -1,
                         make_reasoning_budget(budget, message, ctx.reasoning->close, bytes));
      std::string text;
      std::vector<float> logits(256);
      for (size_t at = 0; at < prompt_text.size();) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        const int32_t want = static_cast<uint8_t>(prompt_text[at]);
        logits[want] = 1.0f;
        mask.apply(logits.data(), 256);
        const int32_t token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        HZ_CHECK(logits[token] > -1e30f);
        mask.accept(token);
        text.push_back(static_cast<char>(token));
        if (token == want) ++at;
      }
      const ReasoningSplit split = split_reasoning(text, *ctx.reasoning, ctx.reasoning_inside);
      if (split.has_reasoning) {
        const size_t open_end = ctx.reasoning_inside ? 0 : text.find(ctx.reasoning->open) + ctx.reasoning->open.size();
        const size_t close = text.find(ctx.reasoning->close, open_end);
        const size_t limit = open_end + budget + message.size() + ctx.reasoning->close.size();
        HZ_CHECK(close == std::string::npos ? text.size() < limit : close + ctx.reasoning->close.size() <= limit);
        HZ_CHECK(mask.budget_spent() || close != std::string::npos || text.size() - open_end <= size_t(budget));
      }
    }
  }
  CompletionAssembler assembler(ctx);
  GenerationEvent tokens;
  tokens.token_ids = {1};
  tokens.text = prompt_text;
  if (request.echo) {
    tokens.prompt_chosen = {{1, "", std::numeric_limits<float>::quiet_NaN()}, {2, prompt_text, -1.0f}};
    tokens.prompt_top = {{}, {{3, request.user, -2.0f}}};
  }
  tokens.chosen.push_back({1, tokens.text, -1.0f});
  tokens.top.push_back({{2, request.user, -2.0f}});
  GenerationEvent finished;
  finished.kind = GenerationEvent::Kind::kFinished;
  if (request.stream) {
    assembler.stream_start();
    assembler.stream_tokens(tokens);
    HZ_CHECK(!assembler.stream_finish(finished).empty());
  } else {
    assembler.add_tokens(tokens);
    HZ_CHECK(!assembler.final_body(finished).empty());
  }
  is_authorized(request.user, request.model);
  return 0;
}
