#include "server/responses_api.h"

#include <fmt/format.h>

#include "server/json_text.h"
#include "server/openai_response.h"

namespace hz {
namespace {

using ojson = nlohmann::ordered_json;

// Fields a client may send. Those without an effect here are accepted and ignored (the server
// keeps nothing, so `store` changes nothing); `previous_response_id` and the rest get a 400.
constexpr const char* kKnown[] = {"model",       "input",  "instructions", "max_output_tokens", "temperature",
                                  "top_p",       "stream", "tools",        "tool_choice",       "parallel_tool_calls",
                                  "text",        "user",   "metadata",     "store",             "service_tier",
                                  "truncation",  "stream_options", "reasoning"};

// The text of a message's content: a string, or a list of text parts.
constexpr std::string_view kTextPartTypes[] = {"input_text", "output_text", "text"};
constexpr TextPartsSpec kTextParts{"parts", kTextPartTypes,
                                   "a text part (input_text or output_text); this server reads text only"};

std::optional<ApiError> content_text(const ojson& content, const std::string& field, std::string* out) {
  return append_content_text(content, field, kTextParts, out);
}

// One input item appended to the chat messages.
std::optional<ApiError> add_item(const ojson& item, const std::string& field, ojson* messages) {
  if (!item.is_object()) return bad_request(fmt::format("'{}' must be an object", field), field);
  if (item.contains("type") && !item["type"].is_string())
    return bad_request(fmt::format("'{}.type' must be a string", field), field + ".type");
  const std::string type = item.value("type", item.contains("role") ? "message" : "");
  if (type == "message") {
    const std::string role = item.contains("role") && item["role"].is_string() ? item["role"].get<std::string>() : "";
    if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
      return bad_request(fmt::format("'{}.role' must be user, assistant, system or developer", field), field + ".role");
    }
    if (!item.contains("content")) return bad_request(fmt::format("'{}.content' is required", field), field + ".content");
    std::string text;
    if (auto e = content_text(item["content"], field + ".content", &text)) return e;
    if (role == "assistant" && !messages->empty() && messages->back().contains("pending_reasoning")) {
      messages->back()["content"] = text;  // the answer after a reasoning item: one turn
      return std::nullopt;
    }
    messages->push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
    return std::nullopt;
  }
  if (type == "function_call") {
    for (const char* k : {"call_id", "name", "arguments"}) {
      if (!item.contains(k) || !item[k].is_string()) {
        return bad_request(fmt::format("'{}.{}' must be a string", field, k), fmt::format("{}.{}", field, k));
      }
    }
    ojson call = {{"id", item["call_id"]},
                  {"type", "function"},
                  {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
    // Calls of one turn join one assistant message, after any text it has.
    if (!messages->empty() && messages->back()["role"] == "assistant") {
      ojson& last = messages->back();
      if (!last.contains("tool_calls")) last["tool_calls"] = ojson::array();
      last["tool_calls"].push_back(std::move(call));
    } else {
      messages->push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({call})}});
    }
    return std::nullopt;
  }
  if (type == "function_call_output") {
    if (!item.contains("call_id") || !item["call_id"].is_string()) {
      return bad_request(fmt::format("'{}.call_id' must be a string", field), field + ".call_id");
    }
    std::string output;
    if (!item.contains("output")) return bad_request(fmt::format("'{}.output' is required", field), field + ".output");
    if (auto e = content_text(item["output"], field + ".output", &output)) return e;
    messages->push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", output}});
    return std::nullopt;
  }
  if (type == "reasoning") {
    // A reasoning item sent back: its text joins the next assistant turn's reasoning_content.
    std::string text;
    if (item.contains("content") && !item["content"].is_null()) {
      static constexpr std::string_view kReasoningTypes[] = {"reasoning_text"};
      static constexpr TextPartsSpec kReasoningParts{"parts", kReasoningTypes, "a reasoning_text part"};
      if (auto e = append_content_text(item["content"], field + ".content", kReasoningParts, &text)) return e;
    }
    messages->push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", text}, {"pending_reasoning", true}});
    return std::nullopt;
  }
  return bad_request(fmt::format("'{}.type' must be message, function_call, function_call_output or reasoning (got '{}')", field,
                                 type.substr(0, 64)),
                     field + ".type");
}

std::optional<ApiError> convert_tools(const ojson& j, ojson* out) {
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (!j["tools"].is_array()) return bad_request("'tools' must be an array", "tools");
    ojson tools = ojson::array();
    for (size_t i = 0; i < j["tools"].size(); ++i) {
      const ojson& t = j["tools"][i];
      const std::string field = fmt::format("tools[{}]", i);
      if (!t.is_object() || string_field(t, "type") != "function") {
        return bad_request(fmt::format("'{}.type' must be function (this server runs no built-in tools)", field),
                           field + ".type");
      }
      ojson fn = ojson::object();
      for (const auto& [key, value] : t.items()) {
        if (key == "type") continue;
        if (key != "name" && key != "description" && key != "parameters" && key != "strict") {
          return bad_request(fmt::format("unrecognized argument '{}.{}'", field, key.substr(0, 64)), field + "." + key.substr(0, 64));
        }
        fn[key] = value;
      }
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    (*out)["tools"] = std::move(tools);
  }
  if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
    const ojson& c = j["tool_choice"];
    if (c.is_string()) {
      (*out)["tool_choice"] = c;
    } else if (c.is_object() && string_field(c, "type") == "function" && c.contains("name")) {
      (*out)["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
    } else {
      return bad_request("'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}",
                         "tool_choice");
    }
  }
  return std::nullopt;
}

// text.format -> response_format.
std::optional<ApiError> convert_text_format(const ojson& j, ojson* out) {
  if (!j.contains("text") || j["text"].is_null()) return std::nullopt;
  const ojson& text = j["text"];
  if (!text.is_object()) return bad_request("'text' must be an object", "text");
  for (const auto& [key, value] : text.items()) {
    if (key != "format" && key != "verbosity") {
      return bad_request(fmt::format("unrecognized argument 'text.{}'", key.substr(0, 64)), "text." + key.substr(0, 64));
    }
  }
  if (!text.contains("format") || text["format"].is_null()) return std::nullopt;
  const ojson& f = text["format"];
  const std::string type = string_field(f, "type");
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    (*out)["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  if (type == "json_schema") {
    ojson schema = ojson::object();
    for (const auto& [key, value] : f.items()) {
      if (key != "type") schema[key] = value;
    }
    (*out)["response_format"] = {{"type", "json_schema"}, {"json_schema", schema}};
    return std::nullopt;
  }
  return bad_request("'text.format.type' must be text, json_object or json_schema", "text.format.type");
}

}  // namespace

std::optional<ApiError> responses_to_chat_body(std::string_view body, std::string* chat_body, std::string* echo) {
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad_request("the request body must be a JSON object");
  if (j.contains("previous_response_id") && !j["previous_response_id"].is_null()) {
    return bad_request("'previous_response_id' is not supported: this server keeps no responses; send the whole "
                       "conversation in 'input'",
                       "previous_response_id");
  }
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) return bad_request(fmt::format("unrecognized request argument supplied: '{}'", key.substr(0, 64)), key.substr(0, 64));
  }
  if (j.contains("truncation") && !j["truncation"].is_null() && j["truncation"] != "disabled") {
    return bad_request("'truncation' must be disabled (the server never drops input)", "truncation");
  }
  ojson out = ojson::object();
  for (const char* k : {"model", "temperature", "top_p", "stream", "parallel_tool_calls"}) {
    if (j.contains(k)) out[k] = j[k];
  }
  if (j.contains("max_output_tokens")) out["max_tokens"] = j["max_output_tokens"];
  ojson messages = ojson::array();
  if (j.contains("instructions") && !j["instructions"].is_null()) {
    if (!j["instructions"].is_string()) return bad_request("'instructions' must be a string", "instructions");
    messages.push_back({{"role", "system"}, {"content", j["instructions"]}});
  }
  auto input = j.find("input");
  if (input == j.end() || input->is_null()) return bad_request("'input' is required", "input");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i) {
      if (auto e = add_item((*input)[i], fmt::format("input[{}]", i), &messages)) return e;
    }
  } else {
    return bad_request("'input' must be a string or a list of items", "input");
  }
  for (ojson& m : messages) m.erase("pending_reasoning");
  out["messages"] = std::move(messages);
  if (j.contains("reasoning") && !j["reasoning"].is_null()) {
    // {effort, summary}: the effort goes to the template as reasoning_effort; summaries are not made.
    const ojson& r = j["reasoning"];
    if (!r.is_object()) return bad_request("'reasoning' must be an object", "reasoning");
    for (const auto& [key, value] : r.items()) {
      if (key != "effort" && key != "summary" && key != "generate_summary") {
        return bad_request(fmt::format("unrecognized argument 'reasoning.{}'", key.substr(0, 64)),
                           "reasoning." + key.substr(0, 64));
      }
    }
    if (r.contains("effort") && !r["effort"].is_null()) {
      const std::string effort = r["effort"].is_string() ? r["effort"].get<std::string>() : "";
      if (effort != "none" && effort != "minimal" && effort != "low" && effort != "medium" && effort != "high") {
        return bad_request("'reasoning.effort' must be one of none, minimal, low, medium, high", "reasoning.effort");
      }
      out["reasoning_effort"] = effort;
    }
  }
  if (auto e = convert_tools(j, &out)) return e;
  if (auto e = convert_text_format(j, &out)) return e;

  ojson e = ojson::object();
  e["instructions"] = j.value("instructions", ojson());
  e["max_output_tokens"] = j.value("max_output_tokens", ojson());
  e["metadata"] = j.value("metadata", ojson::object());
  e["parallel_tool_calls"] = j.value("parallel_tool_calls", ojson(true));
  e["reasoning"] = j.value("reasoning", ojson{{"effort", nullptr}, {"summary", nullptr}});
  e["temperature"] = j.value("temperature", ojson(1.0));
  e["text"] = j.value("text", ojson{{"format", {{"type", "text"}}}});
  e["tool_choice"] = j.value("tool_choice", ojson("auto"));
  e["tools"] = j.value("tools", ojson::array());
  e["top_p"] = j.value("top_p", ojson(1.0));
  e["truncation"] = "disabled";
  *chat_body = dump_json(out);
  *echo = dump_json(e);
  return std::nullopt;
}

ResponsesWriter::ResponsesWriter(std::string id, std::string model, int64_t created, const std::string& echo,
                                 const ReplyFormat& format)
    : id_(std::move(id)), model_(std::move(model)), created_(created), format_(format), stream_(format) {
  echo_ = ojson::parse(echo, nullptr, /*allow_exceptions=*/false);
  if (!echo_.is_object()) echo_ = ojson::object();
}

ResponsesWriter::ojson ResponsesWriter::reasoning_item(const std::string& text) const {
  return {{"type", "reasoning"},
          {"id", "rs_" + id_.substr(std::min<size_t>(5, id_.size()))},
          {"summary", ojson::array()},
          {"content", ojson::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

std::string ResponsesWriter::reasoning_delta(const std::string& text) {
  if (text.empty()) return "";
  const std::string id = reasoning_item("")["id"];
  std::string out;
  if (!reasoning_open_) {
    reasoning_open_ = true;
    ojson item = reasoning_item("");
    item["content"] = ojson::array();
    out += event("response.output_item.added", {{"output_index", output_.size()}, {"item", item}});
    out += event("response.content_part.added", {{"item_id", id}, {"output_index", output_.size()}, {"content_index", 0},
                                                 {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  }
  reasoning_text_ += text;
  out += event("response.reasoning_text.delta",
               {{"item_id", id}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", text}});
  return out;
}

std::string ResponsesWriter::close_reasoning() {
  if (!reasoning_open_) return "";
  reasoning_open_ = false;
  const ojson item = reasoning_item(reasoning_text_);
  const ojson where = {{"item_id", item["id"]}, {"output_index", output_.size()}, {"content_index", 0}};
  ojson done = where;
  done["text"] = reasoning_text_;
  std::string out = event("response.reasoning_text.done", done);
  ojson part_done = where;
  part_done["part"] = item["content"][0];
  out += event("response.content_part.done", part_done);
  out += event("response.output_item.done", {{"output_index", output_.size()}, {"item", item}});
  output_.push_back(item);
  return out;
}

std::string ResponsesWriter::message_id() const { return "msg_" + id_.substr(std::min<size_t>(5, id_.size())); }

ResponsesWriter::ojson ResponsesWriter::response(const char* status, const ojson& output,
                                                 const GenerationEvent* finished) const {
  ojson r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status},
             {"error", nullptr}, {"incomplete_details", nullptr}};
  for (const auto& [key, value] : echo_.items()) r[key] = value;
  r["model"] = model_;
  r["output"] = output;
  r["usage"] = nullptr;
  if (finished != nullptr) {
    if (std::string_view(status) == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    r["usage"] = {{"input_tokens", finished->prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", finished->cached_tokens}}},
                  {"output_tokens", finished->completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
                  {"total_tokens", finished->prompt_tokens + finished->completion_tokens}};
  }
  return r;
}

ResponsesWriter::ojson ResponsesWriter::output_items(const ParsedReply& reply) const {
  ojson items = ojson::array();
  if (!reply.content.empty() || reply.tool_calls.empty()) {
    items.push_back({{"type", "message"},
                     {"id", message_id()},
                     {"status", "completed"},
                     {"role", "assistant"},
                     {"content", ojson::array({{{"type", "output_text"}, {"text", reply.content}, {"annotations", ojson::array()}}})}});
  }
  const std::string seed = id_.substr(std::min<size_t>(5, id_.size()));
  for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
    items.push_back({{"type", "function_call"},
                     {"id", fmt::format("fc_{}{:02}", seed.substr(0, 22), i)},
                     {"call_id", tool_call_id(seed, i, format_.tools)},
                     {"name", reply.tool_calls[i].name},
                     {"arguments", reply.tool_calls[i].arguments},
                     {"status", "completed"}});
  }
  return items;
}

std::string ResponsesWriter::body(const std::string& text, const GenerationEvent& e) const {
  ojson items = ojson::array();
  const ReplyParts parts = read_reply(text, format_);
  if (parts.has_reasoning) items.push_back(reasoning_item(parts.reasoning));
  for (ojson& item : output_items(parts.answer)) items.push_back(std::move(item));
  const bool complete = e.finish_reason == FinishReason::kStop;
  return dump_json(response(complete ? "completed" : "incomplete", items, &e));
}

std::string ResponsesWriter::event(const char* type, ojson data) {
  ojson j = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : data.items()) j[key] = std::move(value);
  return sse_event(type, j);
}

std::string ResponsesWriter::stream_start() {
  std::string out = event("response.created", {{"response", response("in_progress", ojson::array(), nullptr)}});
  out += event("response.in_progress", {{"response", response("in_progress", ojson::array(), nullptr)}});
  return out;
}

std::string ResponsesWriter::open_message() {
  if (message_open_) return "";
  std::string out = close_reasoning();
  message_open_ = true;
  const ojson item = {{"type", "message"}, {"id", message_id()}, {"status", "in_progress"}, {"role", "assistant"},
                      {"content", ojson::array()}};
  out += event("response.output_item.added", {{"output_index", output_.size()}, {"item", item}});
  out += event("response.content_part.added",
               {{"item_id", message_id()}, {"output_index", output_.size()}, {"content_index", 0},
                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", ojson::array()}}}});
  return out;
}

std::string ResponsesWriter::close_message() {
  if (!message_open_) return "";
  message_open_ = false;
  const ojson part = {{"type", "output_text"}, {"text", streamed_}, {"annotations", ojson::array()}};
  const ojson where = {{"item_id", message_id()}, {"output_index", output_.size()}, {"content_index", 0}};
  ojson done = where;
  done["text"] = streamed_;
  std::string out = event("response.output_text.done", done);
  ojson part_done = where;
  part_done["part"] = part;
  out += event("response.content_part.done", part_done);
  const ojson item = {{"type", "message"}, {"id", message_id()}, {"status", "completed"}, {"role", "assistant"},
                      {"content", ojson::array({part})}};
  out += event("response.output_item.done", {{"output_index", output_.size()}, {"item", item}});
  output_.push_back(item);
  return out;
}

std::string ResponsesWriter::stream_tokens(const GenerationEvent& e) {
  const ReasoningStream::Delta d = stream_.feed(e.text);
  std::string out = reasoning_delta(d.reasoning);
  const std::string& text = d.content;
  if (text.empty()) return out;
  out += open_message();
  streamed_ += text;
  out += event("response.output_text.delta",
               {{"item_id", message_id()}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", text}});
  return out;
}

std::string ResponsesWriter::stream_finish(const GenerationEvent& e) {
  if (auto err = finish_error(e)) {
    std::string out = event("error", {{"code", err->code.empty() ? err->type : err->code}, {"message", err->message},
                                       {"param", nullptr}});
    ojson failed = response("failed", output_, &e);
    failed["error"] = {{"code", "server_error"}, {"message", err->message}};
    return out + event("response.failed", {{"response", failed}});
  }
  ReplyParts end = stream_.finish();
  std::string out = reasoning_delta(end.reasoning);
  ParsedReply& reply = end.answer;
  if (!reply.content.empty()) {
    out += open_message();
    streamed_ += reply.content;
    out += event("response.output_text.delta", {{"item_id", message_id()}, {"output_index", output_.size()},
                                                {"content_index", 0}, {"delta", reply.content}});
  }
  if (reply.tool_calls.empty()) out += open_message();  // a reply with no text still has its message
  out += close_reasoning();
  out += close_message();
  ParsedReply calls_only{"", std::move(reply.tool_calls)};
  ojson calls = output_items(calls_only);
  for (ojson& item : calls) {
    if (item["type"] != "function_call") continue;
    const size_t index = output_.size();
    ojson added = item;
    added["arguments"] = "";
    added["status"] = "in_progress";
    out += event("response.output_item.added", {{"output_index", index}, {"item", added}});
    out += event("response.function_call_arguments.delta",
                 {{"item_id", item["id"]}, {"output_index", index}, {"delta", item["arguments"]}});
    out += event("response.function_call_arguments.done",
                 {{"item_id", item["id"]}, {"output_index", index}, {"arguments", item["arguments"]}});
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(item);
  }
  const bool complete = e.finish_reason == FinishReason::kStop;
  out += event(complete ? "response.completed" : "response.incomplete",
               {{"response", response(complete ? "completed" : "incomplete", output_, &e)}});
  return out;
}

}  // namespace hz
