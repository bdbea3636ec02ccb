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

namespace {

bool names_a_credential(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view w : {"key", "token", "auth", "secret", "passw", "pwd", "sig", "credential", "session"}) {
    if (lower.find(w) != std::string::npos) return true;
  }
  return false;
}

// Every occurrence of `key` (when set) in `out` becomes REDACTED.
void redact_key(std::string& out, std::string_view key) {
  constexpr std::string_view kRedacted = "REDACTED";
  if (key.empty()) return;
  for (size_t at = out.find(key); at != std::string::npos; at = out.find(key, at + kRedacted.size())) {
    out.replace(at, key.size(), kRedacted);
  }
}

}  // namespace

std::string redact_target(std::string_view target, const std::vector<std::string>& api_keys) {
  std::string out = redact_target(target);
  for (const std::string& k : api_keys) redact_key(out, k);
  return out;
}

int matching_key(std::string_view authorization_header, std::string_view x_api_key,
                 const std::vector<std::string>& keys) {
  int found = -1;
  // Every key is compared (no early exit), so the time does not tell which key came close.
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool bearer = is_authorized(authorization_header, keys[i]);
    const bool header = !x_api_key.empty() && constant_time_equal(x_api_key, keys[i]);
    if ((bearer || header) && found < 0) found = static_cast<int>(i);
  }
  return found;
}

std::string redact_target(std::string_view target, std::string_view api_key) {
  constexpr std::string_view kRedacted = "REDACTED";
  std::string out;
  const size_t q = target.find('?');
  out.append(target.substr(0, q));
  if (q != std::string_view::npos) {
    out.push_back('?');
    std::string_view query = target.substr(q + 1);
    bool first = true;
    while (true) {
      const size_t amp = query.find('&');
      std::string_view param = query.substr(0, amp);
      if (!first) out.push_back('&');
      first = false;
      const size_t eq = param.find('=');
      if (eq != std::string_view::npos && names_a_credential(param.substr(0, eq))) {
        out.append(param.substr(0, eq + 1));
        out.append(kRedacted);
      } else {
        out.append(param);
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  redact_key(out, api_key);
  return out;
}

}  // namespace hz
