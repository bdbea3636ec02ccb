#include "server/cors.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace hz {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status check_origin(const std::string& o) {
  if (o == "*") return Status();
  const size_t scheme_end = o.find("://");
  const bool has_scheme = scheme_end != std::string::npos && scheme_end > 0;
  const bool has_host = has_scheme && scheme_end + 3 < o.size();
  const bool has_path = has_host && o.find('/', scheme_end + 3) != std::string::npos;
  const bool bad_char = std::any_of(o.begin(), o.end(), [](char c) {
    return static_cast<unsigned char>(c) <= ' ' || c == ',' || c == '"' || static_cast<unsigned char>(c) >= 0x7F;
  });
  if (!has_host || has_path || bad_char) {
    return invalid_argument("--allowed-origins: '{}' is not an origin (scheme://host[:port], e.g. "
                            "https://app.example.com, or *)",
                            o.substr(0, 200));
  }
  return Status();
}

// Origins compare case-insensitively in scheme and host; browsers send them lower-case.
bool same_origin(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Request headers a browser may ask to send: a token list of header names (RFC 9110 tchar).
bool is_header_list(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' ' || c == '.';
  });
}

}  // namespace

Result<std::vector<std::string>> CorsPolicy::parse_flag(std::string_view value) {
  std::vector<std::string> out;
  std::string_view v = trim(value);
  if (!v.empty() && v.front() == '[') {
    nlohmann::json j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_array()) return invalid_argument("--allowed-origins: not a JSON array of strings");
    for (const auto& e : j) {
      if (!e.is_string()) return invalid_argument("--allowed-origins: not a JSON array of strings");
      out.push_back(e.get<std::string>());
    }
  } else {
    while (!v.empty()) {
      size_t comma = v.find(',');
      std::string_view item = trim(v.substr(0, comma));
      if (!item.empty()) out.emplace_back(item);
      v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
    }
  }
  for (std::string& o : out) {
    while (o.size() > 1 && o.back() == '/' && o.find("://") != std::string::npos && o.find("://") + 3 < o.size() - 1)
      o.pop_back();  // "https://a.example/" is the origin https://a.example
    HZ_RETURN_IF_ERROR(check_origin(o));
  }
  return out;
}

bool CorsPolicy::allows(std::string_view origin) const {
  // The origin is echoed back in a header: nothing that could break out of it.
  if (origin.empty() || origin.size() > 512) return false;
  for (char c : origin) {
    if (static_cast<unsigned char>(c) <= ' ' || static_cast<unsigned char>(c) >= 0x7F) return false;
  }
  for (const std::string& o : origins_) {
    if (o == "*" || same_origin(o, origin)) return true;
  }
  return false;
}

CorsPolicy::Headers CorsPolicy::response_headers(std::string_view origin) const {
  Headers h;
  if (!enabled()) return h;
  // The answer depends on Origin: caches must keep one copy per origin.
  h.emplace_back("Vary", "Origin");
  if (!allows(origin)) return h;
  // The origin itself rather than "*": a page may then send credentials (the API key header).
  h.emplace_back("Access-Control-Allow-Origin", std::string(origin));
  h.emplace_back("Access-Control-Expose-Headers", "X-Request-Id, Retry-After");
  return h;
}

std::optional<CorsPolicy::Preflight> CorsPolicy::preflight(std::string_view origin, std::string_view request_method,
                                                           std::string_view request_headers) const {
  if (!enabled()) return std::nullopt;
  Preflight p;
  p.headers.emplace_back("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
  if (!allows(origin)) {
    p.status = 403;
    p.error = origin.empty() ? "a CORS preflight needs an Origin header"
                             : fmt::format("origin '{}' is not allowed (see --allowed-origins)",
                                           std::string(origin.substr(0, 200)));
    return p;
  }
  std::string_view method = trim(request_method);
  if (!method.empty() && method != "GET" && method != "POST" && method != "OPTIONS") {
    p.status = 403;
    p.error = fmt::format("method '{}' is not allowed (GET, POST)", std::string(method.substr(0, 32)));
    return p;
  }
  p.headers.emplace_back("Access-Control-Allow-Origin", std::string(origin));
  p.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  // Whatever headers the page asks for (e.g. the openai client's x-stainless-*): the API reads only
  // Authorization and Content-Type, so allowing others exposes nothing.
  std::string_view asked = trim(request_headers);
  p.headers.emplace_back("Access-Control-Allow-Headers",
                         !asked.empty() && asked.size() <= 4096 && is_header_list(asked) ? std::string(asked)
                                                                                         : "Authorization, Content-Type");
  p.headers.emplace_back("Access-Control-Allow-Credentials", "true");
  p.headers.emplace_back("Access-Control-Max-Age", "600");
  return p;
}

}  // namespace hz
