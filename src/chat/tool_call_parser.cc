#include "chat/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include <optional>

namespace hz {
namespace {

using json = nlohmann::ordered_json;  // arguments keep the order the model wrote them in

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// {"name": "...", "<args_key>": {...}} -> a call; arguments given as a JSON string are accepted
// when they hold an object (some fine-tunes emit them so).
std::optional<ToolCall> call_from_json(const json& j, const char* args_key) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  json args = json::object();
  auto a = j.find(args_key);
  if (a != j.end()) {
    args = *a;
    if (args.is_string()) args = json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!args.is_object()) return std::nullopt;
  }
  return ToolCall{name->get<std::string>(), args.dump()};
}

std::optional<json> parse_json(std::string_view s) {
  json j = json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

ParsedReply as_content(std::string_view reply) { return ParsedReply{std::string(reply), {}}; }

ParsedReply parse_hermes(std::string_view reply) {
  static constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  ParsedReply out;
  std::string content;
  size_t pos = 0;
  for (;;) {
    size_t open = reply.find(kOpen, pos);
    if (open == std::string_view::npos) break;
    size_t close = reply.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos) return as_content(reply);  // cut off inside a call
    content.append(reply.substr(pos, open - pos));
    auto j = parse_json(trim(reply.substr(open + kOpen.size(), close - open - kOpen.size())));
    std::optional<ToolCall> call = j ? call_from_json(*j, "arguments") : std::nullopt;
    if (!call) return as_content(reply);
    out.tool_calls.push_back(std::move(*call));
    pos = close + kClose.size();
  }
  if (out.tool_calls.empty()) return as_content(reply);
  content.append(reply.substr(pos));
  out.content = std::string(trim(content));
  return out;
}

ParsedReply parse_mistral(std::string_view reply) {
  static constexpr std::string_view kMarker = "[TOOL_CALLS]";
  size_t at = reply.find(kMarker);
  if (at == std::string_view::npos) return as_content(reply);
  auto j = parse_json(trim(reply.substr(at + kMarker.size())));
  if (!j || !j->is_array() || j->empty()) return as_content(reply);
  ParsedReply out;
  for (const json& c : *j) {
    std::optional<ToolCall> call = call_from_json(c, "arguments");
    if (!call) return as_content(reply);
    out.tool_calls.push_back(std::move(*call));
  }
  out.content = std::string(trim(reply.substr(0, at)));
  return out;
}

ParsedReply parse_llama3(std::string_view reply) {
  static constexpr std::string_view kPythonTag = "<|python_tag|>";
  std::string_view body = trim(reply);
  if (body.substr(0, kPythonTag.size()) == kPythonTag) body = trim(body.substr(kPythonTag.size()));
  if (body.empty() || body.front() != '{') return as_content(reply);
  auto j = parse_json(body);
  // Llama 3.1 is taught "parameters"; some fine-tunes write OpenAI's "arguments".
  const char* args_key = j && j->is_object() && !j->contains("parameters") ? "arguments" : "parameters";
  std::optional<ToolCall> call = j ? call_from_json(*j, args_key) : std::nullopt;
  if (!call) return as_content(reply);
  ParsedReply out;
  out.tool_calls.push_back(std::move(*call));
  return out;
}

// The elements of a JSON array (s starts after its '[') that are complete: a reply cut off by
// max_tokens keeps the calls it finished.
std::vector<std::string_view> complete_elements(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  for (;;) {
    while (i < s.size() && (is_space(s[i]) || s[i] == ',')) ++i;
    if (i >= s.size() || s[i] == ']') return out;
    const size_t begin = i;
    int depth = 0;
    bool in_string = false;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (in_string) {
        if (c == '\\') ++i;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '"') in_string = true;
      else if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') {
        if (--depth == 0) break;
      }
    }
    if (i >= s.size()) return out;  // cut off inside this element
    out.push_back(s.substr(begin, ++i - begin));
  }
}

// The text of a JSON string whose opening quote has been read and which may be cut off: as much
// of it as decodes (an escape or surrogate cut in half is dropped).
std::string partial_string(std::string_view s) {
  size_t end = 0;
  for (; end < s.size(); ++end) {
    if (s[end] == '\\') ++end;
    else if (s[end] == '"') break;
  }
  std::string raw(s.substr(0, std::min(end, s.size())));
  for (int dropped = 0; dropped <= 12 && !raw.empty(); ++dropped) {
    json j = json::parse("\"" + raw + "\"", nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.is_string()) return j.get<std::string>();
    raw.pop_back();
  }
  return "";
}

// After `{` and optional spaces: whether `key` follows as a member name with its colon, and where
// the value starts.
bool member(std::string_view body, std::string_view key, size_t* value_at) {
  size_t i = 1;
  while (i < body.size() && is_space(body[i])) ++i;
  if (body.substr(i, key.size() + 2) != "\"" + std::string(key) + "\"") return false;
  i += key.size() + 2;
  while (i < body.size() && is_space(body[i])) ++i;
  if (i >= body.size() || body[i] != ':') return false;
  ++i;
  while (i < body.size() && is_space(body[i])) ++i;
  *value_at = i;
  return true;
}

// A generic reply that does not parse whole was cut off (the grammar allows nothing else): the
// calls it completed, or the text of its response so far. Never the JSON envelope itself, which
// is the server's protocol with the model, not something the model said to the user.
ParsedReply salvage_generic(std::string_view body) {
  ParsedReply out;
  size_t at = 0;
  if (body.empty() || body.front() != '{') return as_content(body);
  if (member(body, "tool_calls", &at)) {
    if (at < body.size() && body[at] == '[') {
      for (std::string_view e : complete_elements(body.substr(at + 1))) {
        auto j = parse_json(e);
        std::optional<ToolCall> call = j ? call_from_json(*j, "arguments") : std::nullopt;
        if (call) out.tool_calls.push_back(std::move(*call));
      }
    }
    return out;
  }
  if (member(body, "response", &at)) {
    if (at < body.size() && body[at] == '"') out.content = partial_string(body.substr(at + 1));
    return out;
  }
  return out;
}

ParsedReply parse_generic(std::string_view reply) {
  auto j = parse_json(trim(reply));
  if (!j || !j->is_object()) return salvage_generic(trim(reply));
  auto response = j->find("response");
  if (response != j->end() && response->is_string() && j->size() == 1) {
    return ParsedReply{response->get<std::string>(), {}};
  }
  auto calls = j->find("tool_calls");
  if (calls == j->end() || !calls->is_array() || calls->empty() || j->size() != 1) return as_content(reply);
  ParsedReply out;
  for (const json& c : *calls) {
    std::optional<ToolCall> call = call_from_json(c, "arguments");
    if (!call) return as_content(reply);
    out.tool_calls.push_back(std::move(*call));
  }
  return out;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view chat_template) {
  if (chat_template.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  if (chat_template.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::kMistral;
  // Llama 3.1/3.2 ask for {"name": function name, "parameters": dictionary of argument name ...}.
  if (chat_template.find("<|start_header_id|>") != std::string_view::npos &&
      chat_template.find("\"parameters\"") != std::string_view::npos)
    return ToolCallFormat::kLlama3;
  return ToolCallFormat::kNone;
}

ParsedReply parse_tool_calls(std::string_view reply, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return parse_hermes(reply);
    case ToolCallFormat::kMistral: return parse_mistral(reply);
    case ToolCallFormat::kLlama3: return parse_llama3(reply);
    case ToolCallFormat::kGeneric: return parse_generic(reply);
    case ToolCallFormat::kNone: break;
  }
  return as_content(reply);
}

}  // namespace hz
