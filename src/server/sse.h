// Server-sent events framing for streamed completions: `data: <json>\n\n`, ended by `data: [DONE]`.
#pragma once

#include <string>
#include <string_view>

namespace hz {

inline std::string sse_data(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  out += "data: ";
  out += payload;
  out += "\n\n";
  return out;
}

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace hz
