// Engine events -> OpenAI response shapes: SSE chunks ("text_completion" / "chat.completion.chunk")
// for streams, or one full "text_completion" / "chat.completion" object. No I/O here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/anthropic.h"
#include "server/reply_writer.h"
#include "server/responses_api.h"
#include "server/tool_calling.h"

namespace hz {

enum class ReplyShape { kOpenAi, kAnthropic, kResponses };

struct ResponseContext {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;    // the served model name
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Chat with tools: the format the reply's calls are parsed from (kNone: tools off). Call ids
  // derive from the response id.
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  bool parallel_tool_calls = true;  // false: a reply's calls are cut to the first
  // Chat with a model that reasons: the reply's reasoning, split with these tags, is returned apart
  // (message.reasoning_content, streamed as delta.reasoning_content) and tool calls are parsed
  // from the answer after it. `reasoning_inside`: the prompt opened the reasoning.
  std::optional<ReasoningTags> reasoning;
  bool reasoning_inside = false;
  ReplyFormat reply_format() const { return {tool_format, parallel_tool_calls, reasoning, reasoning_inside}; }
  // The reply's shapes: OpenAI's chat/completions, Anthropic's Messages (anthropic.h) or OpenAI's
  // Responses (responses_api.h); prompt_tokens for their first event, `echo` (a JSON object) the
  // request fields a Responses object repeats.
  ReplyShape shape = ReplyShape::kOpenAi;
  int32_t prompt_tokens = 0;
  std::string echo;
  // This choice's index among the request's `n` (OpenAI's shapes only; set by the server per choice).
  int32_t choice_index = 0;
  int32_t num_choices = 1;
  // Completions with `echo`: the text the reply starts with (this choice's prompt); with logprobs
  // its tokens' come first too, from the engine's prompt logprobs event.
  bool echo_prompt = false;
  std::string echo_text;
};

// OpenAI's finish_reason for an engine finish. kTimeout maps to "length" (the output was cut, as by
// max_tokens) because strictly typed clients reject values outside OpenAI's set; the access log
// keeps the real reason.
const char* openai_finish_reason(FinishReason r);

// The error to answer for a request that finished with kError / kCancelled (none otherwise).
std::optional<ApiError> finish_error(const GenerationEvent& finished);

class CompletionAssembler {
 public:
  explicit CompletionAssembler(ResponseContext ctx);

  // Streaming: the SSE text to send first (chat: the role chunk), for each kTokens event ("" when
  // there is nothing to send), and for the kFinished event (final chunk, usage chunk, [DONE]; or
  // an error event then [DONE]).
  std::string stream_start();
  std::string stream_tokens(const GenerationEvent& e);
  std::string stream_finish(const GenerationEvent& e);

  // stream_finish in two parts, for one assembler per choice (`n`): this choice's last chunks for
  // its kFinished event (which must not be a failure: those end the stream with stream_finish),
  // and, once every choice is done, the usage chunk (when asked for) and [DONE] for `usage`, the
  // choices' usage summed. Anthropic's and the Responses shapes (one choice) end in stream_end.
  std::string stream_finish_choice(const GenerationEvent& e);
  // `reasoning_tokens`: the choices' summed (-1: this assembler's own).
  std::string stream_end(const GenerationEvent& usage, int32_t reasoning_tokens = -1);

  // Non-streamed: accumulate kTokens events, then the full response body on kFinished.
  void add_tokens(const GenerationEvent& e);
  std::string final_body(const GenerationEvent& finished) const;
  // One body with every choice (parts[i] finished with *finished[i]) and `usage`'s token counts
  // (the caller sums them: completion tokens of every choice, each prompt once); final_body for one choice.
  static std::string merged_body(const std::vector<const CompletionAssembler*>& parts,
                                 const std::vector<const GenerationEvent*>& finished, const GenerationEvent& usage);

  const std::string& text() const { return text_; }
  // Tokens of the reply that belong to its reasoning (the close tag's included); 0 without. Counted
  // by where each event's text falls, so text a stop string held back can add a few tokens.
  int32_t reasoning_tokens() const;

 private:
  std::string chunk(const std::string& text, const GenerationEvent* logprob_src, const char* finish) const;
  // The chunk around one choice with this text and `logprobs` (null: none).
  std::string chunk_with(const std::string& text, nlohmann::ordered_json logprobs, const char* finish,
                         const std::string& reasoning = {}) const;
  nlohmann::ordered_json logprobs_of(const GenerationEvent* src) const;  // null without logprobs
  // `reasoning_tokens` >= 0: completion_tokens_details for a reasoning model's reply.
  std::string usage_json(const GenerationEvent& finished, int32_t reasoning_tokens = -1) const;
  void note_tokens(const GenerationEvent& e);  // after text_ grew by e.text
  nlohmann::ordered_json choice_json(const GenerationEvent& finished) const;  // non-streamed
  std::string delta_chunk(const nlohmann::ordered_json& delta) const;  // chat: one choice with this delta
  // The OpenAI tool_calls array for `calls` (streamed: with "index", without: as in a message).
  nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls) const;
  const char* finish_reason(const GenerationEvent& finished, bool has_calls) const;

  ResponseContext ctx_;
  std::optional<ReplyStream> reply_stream_;  // streamed chat with tools or reasoning
  std::unique_ptr<ReplyWriter> writer_;  // Anthropic's or the Responses API's shapes
  std::string text_;        // everything generated so far (non-streamed: the whole answer)
  // Per kTokens event: the size of text_ after it and its number of tokens (reasoning_tokens()).
  std::vector<std::pair<size_t, int32_t>> token_spans_;
  int64_t text_offset_ = 0; // completions logprobs: where the next token's text starts
  // Non-streamed logprobs, per token.
  std::vector<TokenLogprob> chosen_;
  std::vector<std::vector<TokenLogprob>> top_;
  // Echo with logprobs: the prompt tokens' (GenerationEvent::prompt_chosen / prompt_top).
  std::vector<TokenLogprob> prompt_chosen_;
  std::vector<std::vector<TokenLogprob>> prompt_top_;
};

}  // namespace hz
