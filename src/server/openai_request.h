// Parsing and validation of OpenAI /v1/completions and /v1/chat/completions request bodies into
// native structs (the engine never sees JSON). Unknown fields, wrong types and values out of range
// are 400s naming the field; a few fields that carry no behaviour (user, metadata, store,
// service_tier; parallel_tool_calls in completions) are accepted and ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/server_options.h"
#include "server/tool_calling.h"

namespace hz {

enum class ApiKind { kCompletion, kChat };

// A call an assistant turn made, as the client sends it back.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI sends it
};

struct ChatMessage {
  std::string role;  // system, developer, user, assistant, tool
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant
  std::string tool_call_id;              // tool: the call this result answers
  std::string name;                      // optional participant / function name
  // assistant: the reasoning of that turn as a client sends it back (reasoning_content, or vLLM's
  // newer `reasoning`); templates of reasoning models read it (most drop it from history).
  std::string reasoning;
};

// One prompt of /v1/completions: a text, or token ids.
struct CompletionPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct ParsedRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;  // as sent; one model per server, so only echoed in logs

  // Completions: the prompts, one unless the request sent a batch (a list of texts or of token id
  // lists); each gets `n` choices.
  std::vector<CompletionPrompt> prompts;
  // Chat: the conversation, texts already cleaned.
  std::vector<ChatMessage> messages;

  SamplingParams sampling;
  bool max_tokens_set = false;  // false: completions default to 16, chat to the rest of the context
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t n = 1;               // choices to generate for the prompt (1..kMaxChoices)
  // Completions: the reply's text starts with the prompt; with logprobs, the prompt tokens' too
  // (their log-probabilities, the first token's null). max_tokens may then be 0 (scoring only).
  bool echo = false;
  std::string user;

  // Chat: tools, tool_choice, parallel_tool_calls.
  ToolRequest tools;
  // Chat: chat_template_kwargs, extra variables for the chat template (vLLM's; e.g. Qwen3's
  // enable_thinking). An object; empty when not sent.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // Chat: thinking_token_budget (vLLM's): the most tokens a reasoning model may think before its
  // close tag is forced; -1 = no budget (over the server's default); none = the server's default.
  std::optional<int32_t> thinking_token_budget;

  // Constrained output: grammar text (grammar/grammar.h) from `grammar` or compiled from
  // `response_format`; empty = none. grammar_field names the request field for errors.
  std::string grammar_text;
  std::string grammar_field;
};

// The most choices (`n`) one request may ask for: each is a sequence of its own in the engine.
inline constexpr int32_t kMaxChoices = 64;
// The most sequences one request may start: prompts of a batch times `n`.
inline constexpr int32_t kMaxRequestSequences = 128;

struct ParseOptions {
  bool normalize_newlines = false;
  SamplingDefaults sampling;  // for the sampling fields a request leaves out
};

// Fills `out` from a request body; returns the 400 to answer when the body is not acceptable.
std::optional<ApiError> parse_request(ApiKind kind, std::string_view body, const ParseOptions& options,
                                      ParsedRequest* out);

// Deepest array/object nesting accepted in a body (a guard for the JSON library's recursion).
inline constexpr int kMaxJsonDepth = 64;

}  // namespace hz
