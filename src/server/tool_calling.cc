#include "server/tool_calling.h"

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/openai_request.h"

namespace hz {
namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t kMaxTools = 128;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool valid_function_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

// A grammar literal for fixed text (escapes as grammar_parser reads them).
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

ojson call_schema(const ToolDefinition& d, const char* args_key, const ojson& params) {
  ojson s = {{"type", "object"},
             {"properties", {{"name", {{"const", d.name}}}, {args_key, params}}},
             {"required", {"name", args_key}},
             {"additionalProperties", false}};
  return s;
}

}  // namespace

std::optional<ApiError> parse_tool_request(const ojson& body, ToolRequest* out) {
  *out = ToolRequest();
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return bad_request("'tools' must be an array of {\"type\": \"function\", \"function\": {...}}", "tools");
    if (tools->size() > kMaxTools) return bad_request(fmt::format("'tools' has more than {} entries", kMaxTools), "tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string field = fmt::format("tools[{}]", i);
      if (!t.is_object()) return bad_request(fmt::format("'{}' must be an object", field), field);
      for (const auto& [key, value] : t.items()) {
        if (key != "type" && key != "function")
          return bad_request(fmt::format("unrecognized argument '{}.{}'", field, key.substr(0, 64)), field + "." + key.substr(0, 64));
      }
      auto type = t.find("type");
      if (type == t.end() || *type != "function") {
        return bad_request(fmt::format("'{}.type' must be \"function\"", field), field + ".type");
      }
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object()) return bad_request(fmt::format("'{}.function' must be an object", field), field + ".function");
      for (const auto& [key, value] : fn->items()) {
        if (key != "name" && key != "description" && key != "parameters" && key != "strict")
          return bad_request(fmt::format("unrecognized argument '{}.function.{}'", field, key.substr(0, 64)),
                             field + ".function." + key.substr(0, 64));
      }
      ToolDefinition d;
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || !valid_function_name(name->get<std::string>())) {
        return bad_request(fmt::format("'{}.function.name' must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -", field),
                           field + ".function.name");
      }
      d.name = name->get<std::string>();
      for (const ToolDefinition& other : out->defs) {
        if (other.name == d.name)
          return bad_request(fmt::format("'{}.function.name' '{}' is defined twice", field, d.name), field + ".function.name");
      }
      auto desc = fn->find("description");
      if (desc != fn->end() && !desc->is_null() && !desc->is_string())
        return bad_request(fmt::format("'{}.function.description' must be a string", field), field + ".function.description");
      auto strict = fn->find("strict");
      if (strict != fn->end() && !strict->is_null() && !strict->is_boolean())
        return bad_request(fmt::format("'{}.function.strict' must be a boolean", field), field + ".function.strict");
      auto params = fn->find("parameters");
      if (params == fn->end() || params->is_null()) {
        d.parameters = {{"type", "object"}, {"properties", ojson::object()}};  // OpenAI: no parameters
      } else if (!params->is_object()) {
        return bad_request(fmt::format("'{}.function.parameters' must be a JSON Schema object", field), field + ".function.parameters");
      } else {
        d.parameters = *params;
      }
      out->defs.push_back(std::move(d));
    }
    out->tools = *tools;
  }

  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (out->defs.empty()) return bad_request("'tool_choice' is only allowed when 'tools' are given", "tool_choice");
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "auto") out->choice = ToolChoice::kAuto;
      else if (c == "none") out->choice = ToolChoice::kNone;
      else if (c == "required") out->choice = ToolChoice::kRequired;
      else return bad_request("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
    } else if (choice->is_object()) {
      auto type = choice->find("type");
      auto fn = choice->find("function");
      auto name = fn != choice->end() && fn->is_object() ? fn->find("name") : choice->end();
      if (type == choice->end() || *type != "function" || fn == choice->end() || !fn->is_object() ||
          name == fn->end() || !name->is_string()) {
        return bad_request("'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
      }
      out->choice = ToolChoice::kNamed;
      out->named = name->get<std::string>();
      bool known = false;
      for (const ToolDefinition& d : out->defs) known = known || d.name == out->named;
      if (!known) {
        return bad_request(fmt::format("'tool_choice' names function '{}', which is not in 'tools'", out->named.substr(0, 64)),
                           "tool_choice");
      }
    } else {
      return bad_request("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) return bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    out->parallel = parallel->get<bool>();
  }
  return std::nullopt;
}

Result<ToolSetup> plan_tool_calls(const ToolRequest& req, ToolCallFormat native) {
  ToolSetup setup;
  if (!req.active()) return setup;
  setup.format = native == ToolCallFormat::kNone ? ToolCallFormat::kGeneric : native;
  const bool constrained = req.choice == ToolChoice::kRequired || req.choice == ToolChoice::kNamed;
  if (!constrained && setup.format != ToolCallFormat::kGeneric) return setup;  // the model decides, unconstrained

  // Each callable tool's arguments schema, checked on its own so that an error names the tool.
  const char* args_key = setup.format == ToolCallFormat::kLlama3 ? "parameters" : "arguments";
  ojson calls = ojson::array();
  for (size_t i = 0; i < req.defs.size(); ++i) {
    const ToolDefinition& d = req.defs[i];
    if (req.choice == ToolChoice::kNamed && d.name != req.named) continue;
    ojson params = d.parameters;
    auto check = grammar::json_schema_to_grammar(params);
    if (!check.ok()) {
      // Only a required call must follow its schema; when the model may answer in text, an
      // unsupported schema leaves that tool's arguments free (any JSON value; a call whose
      // arguments are not an object is returned as content).
      if (constrained) {
        return invalid_argument("tools[{}].function.parameters: {}", i, check.status().message());
      }
      params = true;
    }
    calls.push_back(call_schema(d, args_key, params));
  }
  ojson one_call = calls.size() == 1 ? calls[0] : ojson{{"anyOf", calls}};
  ojson schema;
  std::string root;
  switch (setup.format) {
    case ToolCallFormat::kHermes:
      schema = one_call;
      root = "root ::= \" \"? tc-one" + std::string(req.parallel && req.choice != ToolChoice::kNamed ? " (\"\\n\" tc-one)*" : "") +
             "\ntc-one ::= " + literal("<tool_call>\n") + " tool-call " + literal("\n</tool_call>") + "\n";
      break;
    case ToolCallFormat::kMistral:
      schema = {{"type", "array"}, {"items", one_call}, {"minItems", 1}};
      if (!req.parallel || req.choice == ToolChoice::kNamed) schema["maxItems"] = 1;
      root = "root ::= \" \"? " + literal("[TOOL_CALLS]") + " tool-call\n";
      break;
    case ToolCallFormat::kLlama3:
      schema = one_call;
      root = "root ::= tool-call\n";
      break;
    case ToolCallFormat::kGeneric: {
      ojson list = {{"type", "array"}, {"items", one_call}, {"minItems", 1}};
      if (!req.parallel || req.choice == ToolChoice::kNamed) list["maxItems"] = 1;
      ojson call_reply = {{"type", "object"},
                          {"properties", {{"tool_calls", list}}},
                          {"required", {"tool_calls"}},
                          {"additionalProperties", false}};
      if (constrained) {
        schema = call_reply;
      } else {
        ojson text_reply = {{"type", "object"},
                            {"properties", {{"response", {{"type", "string"}}}}},
                            {"required", {"response"}},
                            {"additionalProperties", false}};
        schema = {{"anyOf", {call_reply, text_reply}}};
      }
      root = "root ::= tool-call\n";
      break;
    }
    case ToolCallFormat::kNone: break;
  }
  auto g = grammar::json_schema_to_grammar(schema);
  if (!g.ok()) return invalid_argument("tools: {}", g.status().message());
  // The schema's start rule becomes `tool-call` under the format's own `root`.
  std::string text = std::move(g).value();
  constexpr std::string_view kRoot = "root ::= ";
  if (text.compare(0, kRoot.size(), kRoot) != 0) return Status(StatusCode::kInternal, "tools: unexpected grammar form");
  setup.grammar = root + "tool-call ::= " + text.substr(kRoot.size());

  if (setup.format == ToolCallFormat::kGeneric) {
    std::string t = "You can call these tools (each with a JSON Schema of its arguments):\n";
    for (size_t i = 0; i < req.defs.size(); ++i) {
      const ojson& fn = req.tools[i]["function"];
      ojson line = {{"name", req.defs[i].name}};
      if (fn.contains("description") && fn["description"].is_string()) line["description"] = fn["description"];
      line["parameters"] = req.defs[i].parameters;
      t += line.dump() + "\n";
    }
    t += "To call tools, reply with only a JSON object: {\"tool_calls\": [{\"name\": <tool name>, \"arguments\": "
         "<arguments object>}]}";
    if (req.choice == ToolChoice::kNamed) t += fmt::format("\nCall the tool {} now.", req.named);
    else if (req.choice == ToolChoice::kRequired) t += "\nCall at least one tool now.";
    else t += "\nTo answer without a tool, reply with only a JSON object: {\"response\": <your answer as a string>}";
    setup.system_text = std::move(t);
  }
  return setup;
}

ojson template_messages(const std::vector<ChatMessage>& messages, ToolCallFormat native,
                        const std::string& system_text, bool system_in_user) {
  auto arguments_value = [](const std::string& args) {
    ojson a = ojson::parse(args, nullptr, /*allow_exceptions=*/false);
    return a.is_discarded() ? ojson(args) : a;  // templates write arguments with tojson
  };
  ojson out = ojson::array();
  const bool generic = native == ToolCallFormat::kNone;
  for (const ChatMessage& m : messages) {
    if (generic && m.role == "tool") {
      ojson result = {{"tool_response", {{"tool_call_id", m.tool_call_id}}}};
      if (!m.name.empty()) result["tool_response"]["name"] = m.name;
      result["tool_response"]["content"] = m.content;
      // Results of one turn's calls form one user turn (templates insist on alternating roles).
      if (!out.empty() && out.back()["role"] == "user" && out.back().contains("tool_results")) {
        out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + result.dump();
      } else {
        out.push_back({{"role", "user"}, {"content", result.dump()}, {"tool_results", true}});
      }
      continue;
    }
    if (generic && m.role == "user" && !out.empty() && out.back().contains("tool_results")) {
      out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + m.content;  // keep turns alternating
      out.back().erase("tool_results");
      continue;
    }
    ojson msg = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      if (generic) {
        ojson calls = ojson::array();
        for (const auto& c : m.tool_calls) calls.push_back({{"name", c.name}, {"arguments", arguments_value(c.arguments)}});
        std::string text = ojson{{"tool_calls", calls}}.dump();
        msg["content"] = m.content.empty() ? text : m.content + "\n" + text;
      } else {
        ojson calls = ojson::array();
        for (const auto& c : m.tool_calls) {
          calls.push_back({{"id", c.id},
                           {"type", "function"},
                           {"function", {{"name", c.name}, {"arguments", arguments_value(c.arguments)}}}});
        }
        msg["tool_calls"] = calls;
      }
    }
    if (!m.reasoning.empty()) msg["reasoning_content"] = m.reasoning;
    if (!m.tool_call_id.empty()) msg["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) msg["name"] = m.name;
    out.push_back(std::move(msg));
  }
  for (auto& m : out) m.erase("tool_results");
  if (!system_text.empty()) {
    const char* role = system_in_user ? "user" : "system";
    bool merged = false;
    for (auto& m : out) {
      if (m["role"] == role || (!system_in_user && m["role"] == "developer")) {
        m["content"] = system_in_user ? system_text + "\n\n" + m["content"].get<std::string>()
                                      : m["content"].get<std::string>() + "\n\n" + system_text;
        merged = true;
      }
      if (merged || !system_in_user) break;  // the system message, if any, is the first
    }
    if (!merged) out.insert(out.begin(), ojson{{"role", role}, {"content", system_text}});
  }
  return out;
}

std::string tool_call_id(std::string_view seed_hex, size_t index, ToolCallFormat format) {
  std::string base(seed_hex.substr(0, 22));
  while (base.size() < 22) base += '0';
  if (format == ToolCallFormat::kMistral) return fmt::format("{}{:02}", base.substr(0, 7), index % 100);
  return fmt::format("call_{}{:02}", base, index % 100);
}

std::string ToolStreamGate::feed(std::string_view text) {
  all_.append(text);
  if (capturing_ || format_ == ToolCallFormat::kNone) {
    if (format_ == ToolCallFormat::kNone) {
      std::string out = all_.substr(sent_);
      sent_ = all_.size();
      return out;
    }
    return "";
  }
  if (format_ == ToolCallFormat::kGeneric) {  // the whole reply is JSON: parsed at the end
    capturing_ = true;
    return "";
  }
  if (format_ == ToolCallFormat::kLlama3) {
    if (!plain_) {
      static constexpr std::string_view kTag = "<|python_tag|>";
      size_t first = all_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) return "";
      std::string_view body = std::string_view(all_).substr(first);
      if (body.front() == '{' || body.substr(0, kTag.size()) == kTag) {
        capturing_ = true;
        return "";
      }
      if (kTag.substr(0, body.size()) == body) return "";  // may still become the tag
      plain_ = true;
    }
    std::string out = all_.substr(sent_);
    sent_ = all_.size();
    return out;
  }
  const std::string_view marker = format_ == ToolCallFormat::kHermes ? "<tool_call>" : "[TOOL_CALLS]";
  size_t at = all_.find(marker, sent_);
  size_t end = all_.size();
  if (at != std::string::npos) {
    capturing_ = true;
    end = at;
  } else {
    // Hold back a tail that may be the start of the marker.
    for (size_t k = std::min(marker.size() - 1, all_.size() - sent_); k > 0; --k) {
      if (all_.compare(all_.size() - k, k, marker.substr(0, k)) == 0) {
        end = all_.size() - k;
        break;
      }
    }
  }
  // Whitespace before a call is trimmed away in the parsed reply: hold it until text follows.
  while (end > sent_ && is_space(all_[end - 1])) --end;
  std::string out = all_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

ParsedReply parse_reply(std::string_view text, ToolCallFormat format, bool parallel) {
  ParsedReply r = parse_tool_calls(text, format);
  if (!parallel && r.tool_calls.size() > 1) r.tool_calls.resize(1);
  return r;
}

ParsedReply ToolStreamGate::finish() {
  ParsedReply r = parse_reply(all_, format_, parallel_);
  if (r.tool_calls.empty()) {
    if (format_ == ToolCallFormat::kGeneric && sent_ == 0) return r;  // {"response": ...} or raw text
    r.content = all_.substr(sent_);  // no call: the reply is content, as sent so far plus the rest
    return r;
  }
  // Calls: content is the text around them; what was streamed is its beginning.
  std::string_view sent(all_.data(), sent_);
  size_t lead = 0;
  while (lead < sent.size() && is_space(sent[lead])) ++lead;
  sent.remove_prefix(lead);
  r.content = r.content.compare(0, sent.size(), sent) == 0 ? r.content.substr(sent.size()) : std::string();
  return r;
}

ReplyParts read_reply(std::string_view text, const ReplyFormat& format) {
  ReplyParts out;
  std::string answer(text);
  if (format.reasoning) {
    ReasoningSplit split = split_reasoning(text, *format.reasoning, format.reasoning_inside);
    out.has_reasoning = split.has_reasoning;
    out.reasoning = std::move(split.reasoning);
    answer = std::move(split.content);
  }
  out.answer = format.tools != ToolCallFormat::kNone ? parse_reply(answer, format.tools, format.parallel)
                                                     : ParsedReply{std::move(answer), {}};
  return out;
}

ReplyStream::ReplyStream(const ReplyFormat& format) {
  if (format.reasoning) reasoning_.emplace(*format.reasoning, format.reasoning_inside);
  if (format.tools != ToolCallFormat::kNone) gate_.emplace(format.tools, format.parallel);
}

ReasoningStream::Delta ReplyStream::feed(std::string_view text) {
  ReasoningStream::Delta d;
  if (reasoning_) {
    d = reasoning_->feed(text);
  } else {
    d.content = std::string(text);
  }
  if (gate_) d.content = gate_->feed(d.content);
  return d;
}

ReplyParts ReplyStream::finish() {
  ReplyParts out;
  std::string held;
  if (reasoning_) {
    ReasoningStream::Delta d = reasoning_->finish();
    out.reasoning = std::move(d.reasoning);
    held = std::move(d.content);
  }
  if (gate_) {
    const std::string sent_now = gate_->feed(held);
    out.answer = gate_->finish();
    out.answer.content = sent_now + out.answer.content;
  } else {
    out.answer.content = std::move(held);
  }
  return out;
}

}  // namespace hz
