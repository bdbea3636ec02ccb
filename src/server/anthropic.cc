#include "server/anthropic.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "server/json_text.h"
#include "server/openai_response.h"

namespace hz {
namespace {

using ojson = nlohmann::ordered_json;

// Anthropic content: a string or a list of text blocks (others are refused).
constexpr std::string_view kTextBlockTypes[] = {"text"};
constexpr TextPartsSpec kTextBlocks{"blocks", kTextBlockTypes, "a text block"};

std::optional<ApiError> text_of(const ojson& content, const std::string& field, std::string* out) {
  return append_content_text(content, field, kTextBlocks, out);
}

const char* stop_reason(const GenerationEvent& e, bool has_calls) {
  if (has_calls && e.finish_reason == FinishReason::kStop) return "tool_use";
  return e.finish_reason == FinishReason::kStop ? "end_turn" : "max_tokens";
}

ojson tool_use_block(const std::string& id, const ToolCall& c) {
  ojson input = ojson::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded()) input = ojson::object();
  return {{"type", "tool_use"}, {"id", id}, {"name", c.name}, {"input", input}};
}

std::string call_id(const std::string& msg_id, size_t i) {
  return "toolu_" + tool_call_id(std::string_view(msg_id).substr(std::min<size_t>(4, msg_id.size())), i,
                                 ToolCallFormat::kHermes).substr(5);
}

// o[key] as a boolean into *out (absent or null: false); any other type is refused, naming `field`.
std::optional<ApiError> bool_field(const ojson& o, const char* key, const std::string& field, bool* out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad_request(fmt::format("'{}' must be a boolean", field), field);
  *out = it->get<bool>();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> anthropic_to_chat_body(std::string_view body, std::string* chat_body) {
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad_request("the request body must be a JSON object");
  static const char* const kKnown[] = {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature",
                                       "top_p", "top_k", "stream", "tools", "tool_choice", "metadata", "thinking"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) return bad_request(fmt::format("unrecognized request argument supplied: '{}'", key.substr(0, 64)), key.substr(0, 64));
  }
  if (!j.contains("max_tokens")) return bad_request("'max_tokens' is required", "max_tokens");
  ojson out = ojson::object();
  for (const char* k : {"model", "max_tokens", "temperature", "top_p", "top_k", "stream"}) {
    if (j.contains(k)) out[k] = j[k];
  }
  if (j.contains("stop_sequences")) out["stop"] = j["stop_sequences"];
  if (j.contains("thinking") && !j["thinking"].is_null()) {
    // Reasoning models' templates turn thinking on or off by a variable: Qwen3's enable_thinking,
    // DeepSeek-V3.1's thinking. budget_tokens becomes the reasoning budget (the close tag is forced
    // when it is spent); disabled is a budget of 0, for templates that cannot turn thinking off.
    const ojson& t = j["thinking"];
    const std::string type = string_field(t, "type");
    if (type != "enabled" && type != "disabled") {
      return bad_request("'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": \"disabled\"}",
                         "thinking");
    }
    if (t.contains("budget_tokens") && !t["budget_tokens"].is_null()) {
      if (!t["budget_tokens"].is_number_integer() || t["budget_tokens"].get<int64_t>() < 0 ||
          t["budget_tokens"].get<int64_t>() > (1 << 30)) {
        return bad_request("'thinking.budget_tokens' must be a non-negative integer", "thinking.budget_tokens");
      }
      if (type == "enabled") out["thinking_token_budget"] = t["budget_tokens"];
    }
    if (type == "disabled") out["thinking_token_budget"] = 0;
    out["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}, {"thinking", type == "enabled"}};
  }
  ojson messages = ojson::array();
  if (j.contains("system") && !j["system"].is_null()) {
    std::string system;
    if (auto e = text_of(j["system"], "system", &system)) return e;
    messages.push_back({{"role", "system"}, {"content", system}});
  }
  auto msgs = j.find("messages");
  if (msgs == j.end() || !msgs->is_array()) return bad_request("'messages' must be an array", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object() || !m.contains("role") || !m.contains("content")) {
      return bad_request(fmt::format("'{}' must be an object with 'role' and 'content'", field), field);
    }
    const std::string role = m["role"].is_string() ? m["role"].get<std::string>() : "";
    if (role != "user" && role != "assistant") return bad_request(fmt::format("'{}.role' must be user or assistant", field), field + ".role");
    const ojson& content = m["content"];
    if (content.is_string()) {
      messages.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) return bad_request(fmt::format("'{}.content' must be a string or a list of blocks", field), field + ".content");
    std::string text, reasoning;
    ojson calls = ojson::array();
    for (size_t k = 0; k < content.size(); ++k) {
      const ojson& b = content[k];
      const std::string bf = fmt::format("{}.content[{}]", field, k);
      const std::string type = string_field(b, "type");
      if (type == "text" && b.contains("text") && b["text"].is_string()) {
        text += b["text"].get<std::string>();
      } else if (type == "thinking" && role == "assistant" && b.contains("thinking") && b["thinking"].is_string()) {
        reasoning += b["thinking"].get<std::string>();
      } else if (type == "redacted_thinking" && role == "assistant") {
        // Encrypted by another service: nothing a template could show.
      } else if (type == "tool_use" && role == "assistant" && b.contains("name") && b["name"].is_string()) {
        calls.push_back({{"id", string_field(b, "id")},
                         {"type", "function"},
                         {"function", {{"name", b["name"]}, {"arguments", b.value("input", ojson::object()).dump()}}}});
      } else if (type == "tool_result" && role == "user" && b.contains("tool_use_id") && b["tool_use_id"].is_string()) {
        std::string result;
        if (b.contains("content") && !b["content"].is_null()) {
          if (auto e = text_of(b["content"], bf + ".content", &result)) return e;
        }
        bool is_error = false;
        if (auto e = bool_field(b, "is_error", bf + ".is_error", &is_error)) return e;
        if (is_error) result = "Error: " + result;
        messages.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
      } else {
        return bad_request(
            fmt::format("'{}' must be a text, thinking (assistant), tool_use (assistant) or tool_result (user) block", bf),
            bf);
      }
    }
    if (role == "assistant") {
      ojson msg = {{"role", "assistant"}, {"content", text}};
      if (!calls.empty()) msg["tool_calls"] = calls;
      if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
      messages.push_back(std::move(msg));
    } else if (!text.empty()) {
      messages.push_back({{"role", "user"}, {"content", text}});
    }
  }
  out["messages"] = std::move(messages);
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (!j["tools"].is_array()) return bad_request("'tools' must be an array", "tools");
    ojson tools = ojson::array();
    for (size_t i = 0; i < j["tools"].size(); ++i) {
      const ojson& t = j["tools"][i];
      const std::string field = fmt::format("tools[{}]", i);
      if (!t.is_object() || !t.contains("name")) return bad_request(fmt::format("'{}' must be an object with a 'name'", field), field);
      for (const auto& [key, value] : t.items()) {
        if (key != "name" && key != "description" && key != "input_schema" && key != "type")
          return bad_request(fmt::format("unrecognized argument '{}.{}'", field, key.substr(0, 64)), field + "." + key.substr(0, 64));
      }
      ojson fn = {{"name", t["name"]}};
      if (t.contains("description")) fn["description"] = t["description"];
      if (t.contains("input_schema")) fn["parameters"] = t["input_schema"];
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    out["tools"] = std::move(tools);
  }
  if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
    const ojson& c = j["tool_choice"];
    const std::string type = string_field(c, "type");
    if (type == "auto") out["tool_choice"] = "auto";
    else if (type == "any") out["tool_choice"] = "required";
    else if (type == "none") out["tool_choice"] = "none";
    else if (type == "tool" && c.contains("name")) out["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
    else return bad_request("'tool_choice' must be {\"type\": auto | any | tool (with name) | none}", "tool_choice");
    bool serial = false;
    if (auto e = bool_field(c, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use", &serial)) return e;
    if (serial) out["parallel_tool_calls"] = false;
  }
  *chat_body = dump_json(out);
  return std::nullopt;
}

AnthropicWriter::AnthropicWriter(std::string id, std::string model, int32_t prompt_tokens, const ReplyFormat& format)
    : id_(std::move(id)), model_(std::move(model)), prompt_tokens_(prompt_tokens), format_(format), stream_(format) {}

std::string AnthropicWriter::event(const char* name, const ojson& data) const {
  return sse_event(name, data);
}

std::string AnthropicWriter::open_block(bool thinking) {
  if (block_open_ && block_thinking_ == thinking) return "";
  std::string out = close_block();
  block_open_ = true;
  block_thinking_ = thinking;
  const ojson block = thinking ? ojson{{"type", "thinking"}, {"thinking", ""}} : ojson{{"type", "text"}, {"text", ""}};
  out += event("content_block_start", {{"type", "content_block_start"}, {"index", ++block_index_}, {"content_block", block}});
  return out;
}

std::string AnthropicWriter::thinking_delta(const std::string& text) {
  if (text.empty()) return "";
  std::string out = open_block(/*thinking=*/true);
  out += event("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", block_index_},
                                       {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}});
  return out;
}

std::string AnthropicWriter::text_delta(const std::string& text) {
  if (text.empty()) return "";
  std::string out = open_block(/*thinking=*/false);
  out += event("content_block_delta",
               {{"type", "content_block_delta"}, {"index", block_index_}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  return out;
}

std::string AnthropicWriter::close_block() {
  if (!block_open_) return "";
  block_open_ = false;
  return event("content_block_stop", {{"type", "content_block_stop"}, {"index", block_index_}});
}

std::string AnthropicWriter::stream_start() {
  ojson msg = {{"id", id_},          {"type", "message"},         {"role", "assistant"},
               {"model", model_},    {"content", ojson::array()}, {"stop_reason", nullptr},
               {"stop_sequence", nullptr},
               {"usage", {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}}}};
  return event("message_start", {{"type", "message_start"}, {"message", msg}});
}

std::string AnthropicWriter::stream_tokens(const GenerationEvent& e) {
  const ReasoningStream::Delta d = stream_.feed(e.text);
  return thinking_delta(d.reasoning) + text_delta(d.content);
}

std::string AnthropicWriter::stream_finish(const GenerationEvent& e) {
  if (auto err = finish_error(e)) {
    return event("error", {{"type", "error"}, {"error", {{"type", err->type}, {"message", err->message}}}});
  }
  const ReplyParts end = stream_.finish();
  std::string out = thinking_delta(end.reasoning) + text_delta(end.answer.content);
  out += close_block();
  const std::vector<ToolCall>& calls = end.answer.tool_calls;
  for (size_t i = 0; i < calls.size(); ++i) {
      ojson block = tool_use_block(call_id(id_, i), calls[i]);
      const ojson input = block["input"];
      block["input"] = ojson::object();
      const int index = ++block_index_;
      out += event("content_block_start", {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
      out += event("content_block_delta", {{"type", "content_block_delta"},
                                           {"index", index},
                                           {"delta", {{"type", "input_json_delta"}, {"partial_json", dump_json(input)}}}});
      out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  }
  out += event("message_delta", {{"type", "message_delta"},
                                 {"delta", {{"stop_reason", stop_reason(e, !calls.empty())}, {"stop_sequence", nullptr}}},
                                 {"usage", {{"output_tokens", e.completion_tokens}}}});
  out += event("message_stop", {{"type", "message_stop"}});
  return out;
}

std::string AnthropicWriter::body(const std::string& text, const GenerationEvent& e) const {
  ojson content = ojson::array();
  const ReplyParts parts = read_reply(text, format_);
  if (parts.has_reasoning) content.push_back({{"type", "thinking"}, {"thinking", parts.reasoning}, {"signature", ""}});
  const ParsedReply& reply = parts.answer;
  if (!reply.content.empty()) content.push_back({{"type", "text"}, {"text", reply.content}});
  for (size_t i = 0; i < reply.tool_calls.size(); ++i) content.push_back(tool_use_block(call_id(id_, i), reply.tool_calls[i]));
  ojson msg = {{"id", id_},
               {"type", "message"},
               {"role", "assistant"},
               {"model", model_},
               {"content", content},
               {"stop_reason", stop_reason(e, !reply.tool_calls.empty())},
               {"stop_sequence", nullptr},
               {"usage", {{"input_tokens", e.prompt_tokens}, {"output_tokens", e.completion_tokens}}}};
  return dump_json(msg);
}

}  // namespace hz
