// Tool calling for /v1/chat/completions: the request's tools and tool_choice (parsed and checked),
// how a request asks the model for calls (the chat template's own tool format, or a generic JSON
// form described in a system message for templates that know no tools), the grammar that
// constrains the reply when a call is required, the conversation as the template sees it
// (assistant tool_calls, tool results), and the streaming gate that holds back call text.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "chat/reasoning.h"
#include "chat/tool_call_parser.h"
#include "server/api_error.h"

namespace hz {

struct ChatMessage;

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ToolDefinition {
  std::string name;
  nlohmann::ordered_json parameters;  // JSON Schema of the arguments (an object schema)
};

struct ToolRequest {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as sent, for the template
  std::vector<ToolDefinition> defs;                                 // [tools]
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;     // kNamed: the function
  bool parallel = true;  // parallel_tool_calls: more than one call per reply
  bool active() const { return !defs.empty() && choice != ToolChoice::kNone; }
};

// Reads tools, tool_choice and parallel_tool_calls from a chat request body (key order kept).
std::optional<ApiError> parse_tool_request(const nlohmann::ordered_json& body, ToolRequest* out);

// How one request asks for tool calls.
struct ToolSetup {
  ToolCallFormat format = ToolCallFormat::kNone;  // kNone: no tools in this request
  std::string grammar;      // grammar text constraining the reply; empty = free text
  std::string system_text;  // kGeneric: the tools described, for a system message
};

// `native`: the format the model's chat template writes (detect_tool_call_format); kNone selects
// the generic form. With tool_choice required or a named function the reply is constrained to
// calls whose arguments follow the tool's schema; a schema outside the supported subset is then a
// 400 naming tools[i].function.parameters. The generic form is always constrained (a call or
// {"response": ...}).
Result<ToolSetup> plan_tool_calls(const ToolRequest& request, ToolCallFormat native);

// The conversation as the chat template sees it: {role, content, tool_calls, tool_call_id, name}.
// For a template that knows no tools (`native` kNone) calls and results are written as the
// generic JSON, tool results as user turns, and `system_text` (if any) joins the first system
// message (or a new one; into the first user message when `system_in_user`).
nlohmann::ordered_json template_messages(const std::vector<ChatMessage>& messages, ToolCallFormat native,
                                         const std::string& system_text, bool system_in_user);

// A reply parsed into content and calls. With `parallel` false (parallel_tool_calls: false) only
// the first call is kept, as OpenAI returns at most one then.
ParsedReply parse_reply(std::string_view text, ToolCallFormat format, bool parallel);

// The id of a reply's index-th call: "call_" + 24 characters for most formats; Mistral's
// templates insist on 9 alphanumeric characters.
std::string tool_call_id(std::string_view seed_hex, size_t index, ToolCallFormat format);

// Streaming: passes content through as it comes, but holds back text that may start a tool call
// (and whitespace that would be trimmed before one); from a call on, everything waits for the end,
// where the whole reply is parsed exactly as a non-streamed one.
class ToolStreamGate {
 public:
  explicit ToolStreamGate(ToolCallFormat format, bool parallel = true) : format_(format), parallel_(parallel) {}
  // Content that may be sent now ("" when nothing).
  std::string feed(std::string_view text);
  // At the end: the parsed reply; `content` is what has not been sent yet.
  ParsedReply finish();

 private:
  ToolCallFormat format_;
  bool parallel_;            // false: only the first call is returned
  std::string all_;          // the whole reply so far
  size_t sent_ = 0;          // bytes of all_ sent as content
  bool capturing_ = false;   // a call has started: hold everything
  bool plain_ = false;       // kLlama3: the reply is not a call; send everything
};

// How a chat reply is read back, in every API shape: its reasoning first (none without tags; see
// chat/reasoning.h), then the answer's content and tool calls (kNone: all content).
struct ReplyFormat {
  ToolCallFormat tools = ToolCallFormat::kNone;
  bool parallel = true;  // false: only the first call is returned
  std::optional<ReasoningTags> reasoning;
  bool reasoning_inside = false;  // the prompt opened the reasoning
  bool parses() const { return tools != ToolCallFormat::kNone || reasoning.has_value(); }
};

struct ReplyParts {
  bool has_reasoning = false;
  std::string reasoning;
  ParsedReply answer;
};

// A finished reply read whole.
ReplyParts read_reply(std::string_view text, const ReplyFormat& format);

// The same as the reply streams: reasoning and content as they become certain (ReasoningStream,
// then ToolStreamGate), the rest and the calls at the end, adding up to read_reply.
class ReplyStream {
 public:
  explicit ReplyStream(const ReplyFormat& format);
  ReasoningStream::Delta feed(std::string_view text);
  // What was held back (answer.content: the content not sent yet) and the calls.
  ReplyParts finish();

 private:
  std::optional<ReasoningStream> reasoning_;
  std::optional<ToolStreamGate> gate_;
};

}  // namespace hz
