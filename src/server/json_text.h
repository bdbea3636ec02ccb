// JSON helpers the API shapes share: compact serialization that never throws on the model's
// text, named server-sent events, and the text of a content value (a string or a list of parts).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace hz {

// Compact JSON. Model output may end in a partial UTF-8 sequence in odd cases: such bytes are
// replaced (U+FFFD), never thrown on.
inline std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// o[key] when o is an object holding a string there, else "": a field of the wrong type is then
// refused as a bad value, never thrown on (nlohmann's value() throws on a non-string).
template <class Json>
std::string string_field(const Json& o, const char* key) {
  if (!o.is_object()) return {};
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->template get<std::string>() : std::string();
}

// `event: <name>\ndata: <json>\n\n` (the Anthropic and Responses streams name their events).
std::string sse_event(std::string_view name, const nlohmann::ordered_json& data);

// What a content list may hold, and how the error messages name it.
struct TextPartsSpec {
  const char* list_noun;                  // "blocks", "parts"
  std::span<const std::string_view> types;  // accepted "type" values of a part
  const char* part_description;           // what a part must be, after "must be "
};

// Appends the text of `content` (a string, or a list of parts whose type is one of spec.types and
// which carry a string "text") to `out`; a 400 naming `field` or the part at fault otherwise.
std::optional<ApiError> append_content_text(const nlohmann::ordered_json& content, const std::string& field,
                                            const TextPartsSpec& spec, std::string* out);

}  // namespace hz
