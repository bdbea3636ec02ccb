// Untrusted JSON files (config.json, tokenizer.json, index files) parsed with a bound on nesting,
// so that no later recursive walk, copy or dump of the value can exhaust the stack.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hz {

// Deeper than any real model file nests (tokenizer.json Sequences: 3-4 levels).
constexpr size_t kMaxJsonFileDepth = 64;

// Deepest nesting of '{' / '[' in `text`, outside strings; a linear scan with no recursion.
// When `limit` is exceeded, stops and reports the offset of the bracket that exceeded it.
struct JsonNesting {
  size_t max_depth = 0;
  size_t exceeded_at = std::string_view::npos;  // byte offset, or npos
};
JsonNesting json_nesting(std::string_view text, size_t limit = SIZE_MAX);

// Parses `text` as JSON after checking its nesting against `max_depth`. Errors name `source`
// (and, for nesting, the byte offset).
Result<nlohmann::json> parse_json_bounded(std::string_view text, const std::string& source,
                                          size_t max_depth = kMaxJsonFileDepth);

}  // namespace hz
