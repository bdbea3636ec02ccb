#include "server/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "server/text_hygiene.h"

namespace hz {
namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    default: return "unknown";
  }
}

// Nesting depth of a JSON text, counted outside strings; stops early past `limit`.
int json_depth(std::string_view s, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// Reads typed optional fields of one JSON object; the first failure is kept in `error`.
// A field that is absent or null counts as "not given" (clients often send explicit nulls).
class FieldReader {
 public:
  explicit FieldReader(const json& obj) : obj_(obj) {}
  std::optional<ApiError> error;

  const json* get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  void fail(std::string message, std::string param) {
    if (!error) error = bad_request(std::move(message), std::move(param));
  }
  void type_error(const char* key, const char* want, const json& got) {
    fail(fmt::format("'{}' must be {}, got {}", key, want, type_name(got)), key);
  }

  bool read_bool(const char* key, bool* out) {
    const json* v = get(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return type_error(key, "a boolean", *v), false;
    *out = v->get<bool>();
    return true;
  }

  bool read_int(const char* key, int64_t lo, int64_t hi, int64_t* out) {
    const json* v = get(key);
    if (v == nullptr) return false;
    if (!v->is_number_integer()) return type_error(key, "an integer", *v), false;
    int64_t x;
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      x = std::numeric_limits<int64_t>::max();
    } else {
      x = v->get<int64_t>();
    }
    if (x < lo || x > hi) {
      return fail(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, v->dump()), key), false;
    }
    *out = x;
    return true;
  }

  // lo_open: the lower bound itself is excluded.
  bool read_number(const char* key, double lo, double hi, float* out, bool lo_open = false) {
    const json* v = get(key);
    if (v == nullptr) return false;
    if (!v->is_number()) return type_error(key, "a number", *v), false;
    double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
      return fail(fmt::format("'{}' must be {} {} and <= {}, got {}", key, lo_open ? ">" : ">=", lo, hi, v->dump()),
                  key),
             false;
    }
    *out = static_cast<float>(x);
    return true;
  }

  bool read_string(const char* key, std::string* out) {
    const json* v = get(key);
    if (v == nullptr) return false;
    if (!v->is_string()) return type_error(key, "a string", *v), false;
    *out = v->get<std::string>();
    return true;
  }

 private:
  const json& obj_;
};

// Invalid UTF-8 never survives the JSON parser, which would report it without saying where. So
// parse_request first replaces each invalid byte by this noncharacter (U+FDD0, reserved for
// internal use), and clean() reports a text that contains it as invalid UTF-8, naming the field.
constexpr std::string_view kInvalidByteMarker = "\xEF\xB7\x90";

struct Ctx : ParseOptions {
  bool body_had_invalid_utf8 = false;
};

std::string mark_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 1;
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xC0 && c < 0xE0) len = 2;
    else if (c >= 0xE0 && c < 0xF0) len = 3;
    else if (c >= 0xF0) len = 4;
    if (c >= 0x80 && (i + len > s.size() || !is_valid_utf8(s.substr(i, len)))) {
      out += kInvalidByteMarker;
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::optional<ApiError> clean(std::string& text, const std::string& field, const Ctx& o) {
  if (o.body_had_invalid_utf8 && text.find(kInvalidByteMarker) != std::string::npos) {
    return bad_request(fmt::format("'{}' is not valid UTF-8", field), field);
  }
  Status s = clean_request_text(text, field, o.normalize_newlines);
  if (!s.ok()) return bad_request(s.message(), field);
  return std::nullopt;
}

// Token ids from a JSON array of integers; `field` names it in errors.
std::optional<ApiError> read_token_ids(const json& arr, const std::string& field, std::vector<int32_t>* out) {
  out->clear();
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    if (!t.is_number_integer() || (t.is_number_integer() && !t.is_number_unsigned() && t.get<int64_t>() < 0) ||
        (t.is_number_unsigned() && t.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))) {
      return bad_request(fmt::format("'{}[{}]' must be a token id (a non-negative integer)", field, i),
                         fmt::format("{}[{}]", field, i));
    }
    out->push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

// One prompt: a text or a non-empty list of token ids; `field` names it in errors.
std::optional<ApiError> read_prompt(const json& p, const std::string& field, const Ctx& o, CompletionPrompt* out) {
  if (p.is_string()) {
    out->text = p.get<std::string>();
    return clean(out->text, field, o);
  }
  if (p.empty()) return bad_request(fmt::format("'{}' must not be empty", field), field);
  out->is_tokens = true;
  return read_token_ids(p, field, &out->tokens);
}

// `prompt`: a text, token ids, or a batch (texts, token id lists: one kind, not mixed); each prompt
// of a batch is answered as if sent alone, its choices at indices prompt * n + i.
std::optional<ApiError> parse_prompt(const json& body, const Ctx& o, ParsedRequest* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_request("'prompt' is required", "prompt");
  const json& p = *it;
  out->prompts.clear();
  if (p.is_string()) return read_prompt(p, "prompt", o, &out->prompts.emplace_back());
  if (!p.is_array()) {
    return bad_request(
        fmt::format("'prompt' must be a string, an array of token ids or an array of prompts, got {}", type_name(p)),
        "prompt");
  }
  if (p.empty()) return bad_request("'prompt' must not be empty", "prompt");
  if (!p[0].is_string() && !p[0].is_array()) return read_prompt(p, "prompt", o, &out->prompts.emplace_back());
  const bool texts = p[0].is_string();
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string field = fmt::format("prompt[{}]", i);
    if (texts ? !p[i].is_string() : !p[i].is_array()) {
      return bad_request(fmt::format("'{}' must be {} like 'prompt[0]', got {}", field,
                                     texts ? "a string" : "an array of token ids", type_name(p[i])),
                         field);
    }
    if (auto e = read_prompt(p[i], field, o, &out->prompts.emplace_back())) return e;
  }
  return std::nullopt;
}

// An assistant turn's tool_calls, a tool turn's tool_call_id, and any turn's name.
std::optional<ApiError> parse_message_tools(const json& m, const std::string& field, const std::string& role,
                                            const Ctx& o, ChatMessage* msg) {
  if (auto name = m.find("name"); name != m.end() && !name->is_null()) {
    if (!name->is_string()) return bad_request(fmt::format("'{}.name' must be a string", field), field + ".name");
    msg->name = name->get<std::string>();
    if (auto e = clean(msg->name, field + ".name", o)) return e;
  }
  auto calls = m.find("tool_calls");
  if (calls != m.end() && !calls->is_null()) {
    const std::string cf = field + ".tool_calls";
    if (role != "assistant") return bad_request(fmt::format("'{}' is only allowed in assistant messages", cf), cf);
    if (!calls->is_array()) return bad_request(fmt::format("'{}' must be an array", cf), cf);
    for (size_t k = 0; k < calls->size(); ++k) {
      const json& c = (*calls)[k];
      const std::string f = fmt::format("{}[{}]", cf, k);
      auto fn = c.is_object() ? c.find("function") : c.end();
      if (!c.is_object() || fn == c.end() || !fn->is_object()) {
        return bad_request(fmt::format("'{}' must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}", f), f);
      }
      ChatToolCall call;
      auto id = c.find("id");
      if (id != c.end() && !id->is_null()) {
        if (!id->is_string()) return bad_request(fmt::format("'{}.id' must be a string", f), f + ".id");
        call.id = id->get<std::string>();
      }
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string()) return bad_request(fmt::format("'{}.function.name' must be a string", f), f + ".function.name");
      call.name = name->get<std::string>();
      auto args = fn->find("arguments");
      if (args != fn->end() && !args->is_null()) {
        if (args->is_string()) call.arguments = args->get<std::string>();
        else if (args->is_object()) call.arguments = args->dump();  // lenient: an object as such
        else return bad_request(fmt::format("'{}.function.arguments' must be a JSON string", f), f + ".function.arguments");
      }
      for (std::string* t : {&call.id, &call.name, &call.arguments}) {
        if (auto e = clean(*t, f, o)) return e;
      }
      msg->tool_calls.push_back(std::move(call));
    }
  }
  for (const char* key : {"reasoning_content", "reasoning"}) {
    auto r = m.find(key);
    if (r == m.end() || r->is_null()) continue;
    const std::string rf = field + "." + key;
    if (role != "assistant") return bad_request(fmt::format("'{}' is only allowed in assistant messages", rf), rf);
    if (!r->is_string()) return bad_request(fmt::format("'{}' must be a string", rf), rf);
    msg->reasoning = r->get<std::string>();
    if (auto e = clean(msg->reasoning, rf, o)) return e;
  }
  auto id = m.find("tool_call_id");
  if (id != m.end() && !id->is_null()) {
    if (!id->is_string()) return bad_request(fmt::format("'{}.tool_call_id' must be a string", field), field + ".tool_call_id");
    msg->tool_call_id = id->get<std::string>();
    if (auto e = clean(msg->tool_call_id, field + ".tool_call_id", o)) return e;
  } else if (role == "tool") {
    return bad_request(fmt::format("'{}.tool_call_id' is required in tool messages", field), field + ".tool_call_id");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& body, const Ctx& o, ParsedRequest* out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return bad_request("'messages' is required", "messages");
  if (!it->is_array()) {
    return bad_request(fmt::format("'messages' must be an array, got {}", type_name(*it)), "messages");
  }
  if (it->empty()) return bad_request("'messages' must contain at least one message", "messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object()) return bad_request(fmt::format("'{}' must be an object, got {}", field, type_name(m)), field);
    ChatMessage msg;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return bad_request(fmt::format("'{}.role' must be a string", field), field + ".role");
    }
    msg.role = role->get<std::string>();
    if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool") {
      return bad_request(fmt::format("'{}.role' must be one of system, developer, user, assistant, tool", field),
                         field + ".role");
    }
    auto content = m.find("content");
    std::string content_field = field + ".content";
    if (content == m.end() || content->is_null()) {
      // Only an assistant turn (e.g. one that made tool calls) may come without content.
      if (msg.role != "assistant") return bad_request(fmt::format("'{}' is required", content_field), content_field);
    } else if (content->is_string()) {
      msg.content = content->get<std::string>();
      if (auto e = clean(msg.content, content_field, o)) return e;
    } else if (content->is_array()) {
      // Content parts: only text parts can be rendered into a prompt.
      for (size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        std::string part_field = fmt::format("{}[{}]", content_field, k);
        auto type = part.is_object() ? part.find("type") : part.end();
        if (!part.is_object() || type == part.end() || !type->is_string()) {
          return bad_request(fmt::format("'{}' must be an object with a 'type'", part_field), part_field);
        }
        if (type->get<std::string>() != "text") {
          return bad_request(fmt::format("'{}.type' {} is not supported (text only)", part_field, type->dump()),
                             part_field + ".type");
        }
        auto text = part.find("text");
        if (text == part.end() || !text->is_string()) {
          return bad_request(fmt::format("'{}.text' must be a string", part_field), part_field + ".text");
        }
        std::string t = text->get<std::string>();
        if (auto e = clean(t, part_field + ".text", o)) return e;
        msg.content += t;
      }
    } else {
      return bad_request(fmt::format("'{}' must be a string or an array of content parts, got {}", content_field,
                                     type_name(*content)),
                         content_field);
    }
    if (auto e = parse_message_tools(m, field, msg.role, o, &msg)) return e;
    out->messages.push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(FieldReader& r, const Ctx& o, SamplingParams* s) {
  const json* v = r.get("stop");
  if (v == nullptr) return std::nullopt;
  constexpr size_t kMaxStops = 16;
  auto add = [&](const json& item, const std::string& field) -> std::optional<ApiError> {
    if (!item.is_string()) {
      return bad_request(fmt::format("'{}' must be a string, got {}", field, type_name(item)), field);
    }
    std::string text = item.get<std::string>();
    if (auto e = clean(text, field, o)) return e;
    if (!text.empty()) s->stop.push_back(std::move(text));  // an empty stop string would match at once
    return std::nullopt;
  };
  if (v->is_string()) return add(*v, "stop");
  if (!v->is_array()) return bad_request(fmt::format("'stop' must be a string or an array of strings, got {}",
                                                     type_name(*v)),
                                         "stop");
  if (v->size() > kMaxStops) return bad_request(fmt::format("'stop' has more than {} entries", kMaxStops), "stop");
  for (size_t i = 0; i < v->size(); ++i) {
    if (auto e = add((*v)[i], fmt::format("stop[{}]", i))) return e;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_sampling(ApiKind kind, FieldReader& r, const Ctx& o, ParsedRequest* out) {
  SamplingParams& s = out->sampling;
  int64_t i = 0;
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  // 0 only with echo (scoring a prompt), checked below.
  if (r.read_int("max_tokens", kind == ApiKind::kCompletion ? 0 : 1, kMaxTokens, &i)) {
    s.max_tokens = static_cast<int32_t>(i);
    out->max_tokens_set = true;
  }
  if (kind == ApiKind::kChat && r.read_int("max_completion_tokens", 1, kMaxTokens, &i)) {
    s.max_tokens = static_cast<int32_t>(i);  // the newer name wins over the deprecated max_tokens
    out->max_tokens_set = true;
  }
  s.temperature = o.sampling.temperature;
  s.top_p = o.sampling.top_p;
  s.top_k = o.sampling.top_k;
  s.min_p = o.sampling.min_p;
  s.repetition_penalty = o.sampling.repetition_penalty;
  r.read_number("temperature", 0.0, 2.0, &s.temperature);
  r.read_number("top_p", 0.0, 1.0, &s.top_p, /*lo_open=*/true);
  if (r.read_int("top_k", -1, 1 << 20, &i)) s.top_k = i < 0 ? 0 : static_cast<int32_t>(i);  // -1 = off (vLLM)
  r.read_number("min_p", 0.0, 1.0, &s.min_p);
  r.read_number("presence_penalty", -2.0, 2.0, &s.presence_penalty);
  r.read_number("frequency_penalty", -2.0, 2.0, &s.frequency_penalty);
  r.read_number("repetition_penalty", 0.0, 10.0, &s.repetition_penalty, /*lo_open=*/true);
  if (const json* v = r.get("seed")) {
    if (!v->is_number_integer()) {
      r.type_error("seed", "an integer", *v);
    } else {
      s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
    }
  }
  r.read_bool("ignore_eos", &s.ignore_eos);  // vLLM extension
  if (r.read_int("min_tokens", 0, 1 << 30, &i)) s.min_tokens = static_cast<int32_t>(i);  // vLLM extension
  bool skip_special = true;
  r.read_bool("skip_special_tokens", &skip_special);  // vLLM: control tokens are never printed here
  if (!r.error && !skip_special)
    r.fail("'skip_special_tokens': false is not supported by this server: control tokens never appear in the text",
           "skip_special_tokens");
  bool cache_prompt = true;
  r.read_bool("cache_prompt", &cache_prompt);  // llama-server: the output is the same either way here
  if (const json* v = r.get("stop_token_ids")) {
    if (!v->is_array()) {
      r.type_error("stop_token_ids", "an array of token ids", *v);
    } else if (auto e = read_token_ids(*v, "stop_token_ids", &s.stop_token_ids)) {
      return e;
    }
  }
  if (r.error) return r.error;
  if (auto e = parse_stop(r, o, &s)) return e;

  constexpr int64_t kMaxTopLogprobs = 20;
  if (kind == ApiKind::kCompletion) {
    // Completions: `logprobs` is the number of alternatives (0 = only the chosen token).
    if (r.read_int("logprobs", 0, kMaxTopLogprobs, &i)) {
      s.logprobs = true;
      s.top_logprobs = static_cast<int32_t>(i);
    }
  } else {
    r.read_bool("logprobs", &s.logprobs);
    if (r.read_int("top_logprobs", 0, kMaxTopLogprobs, &i)) {
      if (!s.logprobs && i > 0) {
        r.fail("'top_logprobs' needs 'logprobs': true", "top_logprobs");
      }
      s.top_logprobs = static_cast<int32_t>(i);
    }
  }
  int64_t n = 1;
  if (r.read_int("n", 1, kMaxChoices, &n)) out->n = static_cast<int32_t>(n);
  int64_t best_of = 1;
  if (r.read_int("best_of", 1, std::numeric_limits<int32_t>::max(), &best_of) && best_of != n) {
    // best_of = n returns every choice generated, which is what n does.
    r.fail(best_of < n ? "'best_of' must be at least 'n'"
                       : "'best_of' > 'n' is not supported by this server (it would rank choices by log probability)",
           "best_of");
  }
  r.read_bool("echo", &out->echo);
  if (!r.error && out->max_tokens_set && s.max_tokens == 0 && !out->echo) {
    r.fail("'max_tokens' must be at least 1 (0 only with 'echo': true, to score the prompt)", "max_tokens");
  }
  return r.error;
}

// Every field a request may carry; anything else is a 400 naming it (OpenAI answers so).
std::optional<ApiError> check_fields(ApiKind kind, const json& body) {
  static const char* const kCommon[] = {
      "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "min_p",
      "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "ignore_eos", "stop_token_ids", "stop",
      "n", "logprobs", "logit_bias", "response_format", "grammar", "min_tokens", "skip_special_tokens", "cache_prompt",
      // Accepted and ignored: no behaviour of their own (README lists them).
      "user", "metadata", "store", "service_tier", "parallel_tool_calls"};
  static const char* const kCompletion[] = {"prompt", "echo", "best_of", "suffix"};
  static const char* const kChat[] = {"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice",
                                      "chat_template_kwargs", "reasoning_effort", "thinking_token_budget"};
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* k : kCommon) known = known || key == k;
    if (kind == ApiKind::kCompletion) {
      for (const char* k : kCompletion) known = known || key == k;
    } else {
      for (const char* k : kChat) known = known || key == k;
    }
    if (known) continue;
    std::string name = key.size() > 64 ? key.substr(0, 64) + "..." : key;
    if (key == "functions" || key == "function_call") {
      return bad_request(fmt::format("'{}' is not supported by this server: use 'tools' and 'tool_choice'", name), name);
    }
    if (kind == ApiKind::kCompletion && (key == "tools" || key == "tool_choice")) {
      return bad_request(fmt::format("'{}' is only available in /v1/chat/completions", name), name);
    }
    return bad_request(fmt::format("unrecognized request argument supplied: '{}'", name), name);
  }
  if (kind == ApiKind::kCompletion && body.contains("suffix") && !body["suffix"].is_null()) {
    return bad_request("'suffix' is not supported by this server (no fill-in-the-middle)", "suffix");
  }
  return std::nullopt;
}

// logit_bias: {"token id": bias in [-100, 100]}. Ids are checked against the vocabulary later.
std::optional<ApiError> parse_logit_bias(FieldReader& r, SamplingParams* s) {
  const json* v = r.get("logit_bias");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return bad_request(fmt::format("'logit_bias' must be an object, got {}", type_name(*v)), "logit_bias");
  constexpr size_t kMaxEntries = 1024;
  if (v->size() > kMaxEntries) return bad_request(fmt::format("'logit_bias' has more than {} entries", kMaxEntries), "logit_bias");
  for (const auto& [key, bias] : v->items()) {
    const std::string field = fmt::format("logit_bias[{}]", key.substr(0, 32));
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<int32_t>::max()) {
      return bad_request(fmt::format("'logit_bias' keys must be token ids, got '{}'", key.substr(0, 32)), "logit_bias");
    }
    if (!bias.is_number() || !std::isfinite(bias.get<double>()) || bias.get<double>() < -100 || bias.get<double>() > 100) {
      return bad_request(fmt::format("'{}' must be a number between -100 and 100, got {}", field, bias.dump()), field);
    }
    s->logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias.get<double>()));
  }
  return std::nullopt;
}

// response_format and grammar -> out->grammar_text. `body` is read again with key order kept: a
// schema's properties come out in the order the client wrote them.
std::optional<ApiError> parse_constraints(const json& j, std::string_view body, ParsedRequest* out) {
  auto g = j.find("grammar");
  auto rf = j.find("response_format");
  const bool has_grammar = g != j.end() && !g->is_null();
  const bool has_format = rf != j.end() && !rf->is_null();
  if (has_grammar && has_format) {
    return bad_request("'grammar' and 'response_format' cannot be used together", "grammar");
  }
  if (has_grammar) {
    if (!g->is_string()) return bad_request(fmt::format("'grammar' must be a string, got {}", type_name(*g)), "grammar");
    out->grammar_text = g->get<std::string>();
    out->grammar_field = "grammar";
    return std::nullopt;
  }
  if (!has_format) return std::nullopt;
  if (!rf->is_object()) {
    return bad_request(fmt::format("'response_format' must be an object, got {}", type_name(*rf)), "response_format");
  }
  auto type = rf->find("type");
  if (type == rf->end() || !type->is_string()) {
    return bad_request("'response_format.type' must be one of text, json_object, json_schema", "response_format.type");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    out->grammar_text = grammar::json_object_grammar();
    out->grammar_field = "response_format";
    return std::nullopt;
  }
  if (t != "json_schema") {
    return bad_request(fmt::format("'response_format.type' must be one of text, json_object, json_schema, got '{}'",
                                   t.substr(0, 64)),
                       "response_format.type");
  }
  const nlohmann::ordered_json oj = nlohmann::ordered_json::parse(body);
  const auto& js = oj["response_format"];
  auto spec = js.find("json_schema");
  if (spec == js.end() || !spec->is_object()) {
    return bad_request("'response_format.json_schema' must be an object with a 'schema'", "response_format.json_schema");
  }
  for (const auto& [key, value] : spec->items()) {
    if (key != "name" && key != "schema" && key != "strict" && key != "description") {
      return bad_request(fmt::format("unrecognized argument 'response_format.json_schema.{}'", key.substr(0, 64)),
                         "response_format.json_schema." + key.substr(0, 64));
    }
  }
  auto schema = spec->find("schema");
  if (schema == spec->end() || !(schema->is_object() || schema->is_boolean())) {
    return bad_request("'response_format.json_schema.schema' must be a JSON Schema object",
                       "response_format.json_schema.schema");
  }
  auto text = grammar::json_schema_to_grammar(*schema);
  if (!text.ok()) return bad_request(text.status().message(), "response_format.json_schema.schema");
  out->grammar_text = std::move(text).value();
  out->grammar_field = "response_format.json_schema.schema";
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_request(ApiKind kind, std::string_view body, const ParseOptions& options,
                                      ParsedRequest* out) {
  *out = ParsedRequest();
  out->kind = kind;
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return bad_request(fmt::format("the request body nests deeper than {} levels", kMaxJsonDepth));
  }
  Ctx ctx;
  static_cast<ParseOptions&>(ctx) = options;
  std::string marked;
  if (!is_valid_utf8(body)) {
    ctx.body_had_invalid_utf8 = true;
    marked = mark_invalid_utf8(body);
    body = marked;
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    return bad_request(fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) return bad_request(fmt::format("the request body must be a JSON object, got {}", type_name(j)));
  // Everything below reads with type checks first, but stay safe should a check miss a case.
  try {
    if (auto e = check_fields(kind, j)) return e;
    FieldReader r(j);
    r.read_string("model", &out->model);
    r.read_bool("stream", &out->stream);
    if (const json* so = r.get("stream_options")) {
      if (!out->stream && !r.error) {
        return bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
      }
      if (!so->is_object()) {
        r.type_error("stream_options", "an object", *so);
      } else {
        FieldReader sr(*so);
        sr.read_bool("include_usage", &out->include_usage);
        if (sr.error) {
          sr.error->param = "stream_options.include_usage";
          sr.error->message = "'stream_options." + sr.error->message.substr(1);
          return sr.error;
        }
      }
    }
    r.read_string("user", &out->user);
    if (r.error) return r.error;
    if (auto e = kind == ApiKind::kCompletion ? parse_prompt(j, ctx, out) : parse_messages(j, ctx, out)) return e;
    if (auto e = parse_sampling(kind, r, ctx, out)) return e;
    if (auto e = parse_logit_bias(r, &out->sampling)) return e;
    if (auto e = parse_constraints(j, body, out)) return e;
    if (const auto sequences = static_cast<int64_t>(out->prompts.size()) * out->n; sequences > kMaxRequestSequences) {
      return bad_request(fmt::format("{} prompts with n = {} ask for {} completions; one request may ask for at most {}",
                                     out->prompts.size(), out->n, sequences, kMaxRequestSequences),
                         "prompt");
    }
    if (kind == ApiKind::kChat && j.contains("chat_template_kwargs") && !j["chat_template_kwargs"].is_null()) {
      const nlohmann::ordered_json kw = nlohmann::ordered_json::parse(body)["chat_template_kwargs"];
      if (!kw.is_object()) return bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
      for (const auto& [key, value] : kw.items()) {
        // The variables the server sets itself.
        for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}) {
          if (key == reserved)
            return bad_request(fmt::format("'chat_template_kwargs.{}' is set by the server; send it as a request field", key),
                               "chat_template_kwargs." + key);
        }
      }
      out->template_kwargs = kw;
    }
    if (kind == ApiKind::kChat && j.contains("reasoning_effort") && !j["reasoning_effort"].is_null()) {
      // OpenAI's field; the chat templates of models that take it (gpt-oss) read a variable of that name.
      const json& effort = j["reasoning_effort"];
      static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high"};
      bool valid = false;
      for (const char* e : kEfforts) valid = valid || (effort.is_string() && effort.get<std::string>() == e);
      if (!valid) {
        return bad_request("'reasoning_effort' must be one of none, minimal, low, medium, high", "reasoning_effort");
      }
      if (!out->template_kwargs.contains("reasoning_effort")) out->template_kwargs["reasoning_effort"] = effort;
    }
    if (kind == ApiKind::kChat && j.contains("thinking_token_budget") && !j["thinking_token_budget"].is_null()) {
      const json& b = j["thinking_token_budget"];
      if (!b.is_number_integer() || b.get<int64_t>() < -1 || b.get<int64_t>() > (1 << 30)) {
        return bad_request("'thinking_token_budget' must be an integer from 0 (no thinking) up, or -1 for no budget",
                           "thinking_token_budget");
      }
      out->thinking_token_budget = static_cast<int32_t>(b.get<int64_t>());
    }
    if (kind == ApiKind::kChat && (j.contains("tools") || j.contains("tool_choice") || j.contains("parallel_tool_calls"))) {
      if (auto e = parse_tool_request(nlohmann::ordered_json::parse(body), &out->tools)) return e;
    }
    // An invalid byte outside the texts checked above (a key, the model name, ...).
    if (ctx.body_had_invalid_utf8) return bad_request("the request body is not valid UTF-8");
    return std::nullopt;
  } catch (const json::exception& e) {
    return bad_request(fmt::format("bad request body: {}", e.what()));
  }
}

}  // namespace hz
