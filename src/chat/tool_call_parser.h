// Tool calls in generated text -> OpenAI-style calls (name + JSON arguments), for the formats
// published chat templates teach their models: Hermes-style <tool_call> tags (Qwen 2.5/3),
// Mistral's [TOOL_CALLS] list and Llama 3.1's bare JSON object; and the generic JSON form the
// server uses with templates that know no tools.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hz {

enum class ToolCallFormat {
  kNone,     // the template knows no tools: all output is content
  kHermes,   // <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any number, text around
  kMistral,  // [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...] after any content
  kLlama3,   // the whole reply is {"name": ..., "parameters": {...}} (optionally after <|python_tag|>)
  // For templates that know no tools (the server describes the tools in a system message and
  // constrains the reply): {"tool_calls": [{"name": ..., "arguments": {...}}, ...]} or
  // {"response": "text"}.
  kGeneric,
};

// The format a chat template's tool section writes (from its source text).
ToolCallFormat detect_tool_call_format(std::string_view chat_template);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, serialized (OpenAI sends arguments as a string)
};

struct ParsedReply {
  std::string content;  // the text outside the calls (trimmed of the whitespace around them)
  std::vector<ToolCall> tool_calls;
};

// Splits a finished reply into content and tool calls. NOTE: in the model's own formats a call
// that does not parse (cut off by max_tokens, broken JSON, no name) is not dropped: the whole
// reply is returned as content, with no calls, so nothing the model wrote is lost. The generic
// form is the server's envelope, never content: a reply cut off inside it keeps the calls it
// completed, or the text of its {"response": ...} so far.
ParsedReply parse_tool_calls(std::string_view reply, ToolCallFormat format);

}  // namespace hz
