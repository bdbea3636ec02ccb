#include "server/auth.h"

#include <cctype>
#include <cstdint>

namespace hz {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Loop over the expected length (b) whatever a's length is; a length mismatch still fails.
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    uint8_t ca = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    diff = diff | (ca ^ static_cast<uint8_t>(b[i]));
  }
  return diff == 0;
}

bool is_authorized(std::string_view header, std::string_view expected_key) {
  if (expected_key.empty()) return true;
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  }
  std::string_view token = header.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return constant_time_equal(token, expected_key);
}

}  // namespace hz
