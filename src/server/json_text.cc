#include "server/json_text.h"

#include <fmt/format.h>

#include <algorithm>

namespace hz {

std::string sse_event(std::string_view name, const nlohmann::ordered_json& data) {
  return fmt::format("event: {}\ndata: {}\n\n", name, dump_json(data));
}

std::optional<ApiError> append_content_text(const nlohmann::ordered_json& content, const std::string& field,
                                            const TextPartsSpec& spec, std::string* out) {
  if (content.is_string()) {
    *out += content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) {
    return bad_request(fmt::format("'{}' must be a string or a list of {}", field, spec.list_noun), field);
  }
  for (size_t i = 0; i < content.size(); ++i) {
    const nlohmann::ordered_json& p = content[i];
    const std::string type = p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>() : "";
    const bool known = std::find(spec.types.begin(), spec.types.end(), type) != spec.types.end();
    if (!known || !p.contains("text") || !p["text"].is_string()) {
      const std::string pf = fmt::format("{}[{}]", field, i);
      return bad_request(fmt::format("'{}' must be {}", pf, spec.part_description), pf);
    }
    *out += p["text"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace hz
