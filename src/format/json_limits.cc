#include "format/json_limits.h"

#include <nlohmann/json.hpp>

namespace hz {

JsonNesting json_nesting(std::string_view s, size_t limit) {
  JsonNesting n;
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > n.max_depth) n.max_depth = depth;
      if (depth > limit) {
        n.exceeded_at = i;
        return n;
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return n;
}

Result<nlohmann::json> parse_json_bounded(std::string_view text, const std::string& source, size_t max_depth) {
  const JsonNesting n = json_nesting(text, max_depth);
  if (n.exceeded_at != std::string_view::npos)
    return data_loss("{}: JSON nests deeper than {} levels (at byte {})", source, max_depth, n.exceeded_at);
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return data_loss("{}: not valid JSON", source);
  return j;
}

}  // namespace hz
