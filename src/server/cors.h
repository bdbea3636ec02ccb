// Cross-origin resource sharing (CORS): which browser origins may call the API, the headers that
// tell a browser so, and the answer to its preflight (OPTIONS) request. Off unless
// --allowed-origins names origins. Immutable after construction; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace hz {

class CorsPolicy {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  // `origins`: exact origins ("https://app.example.com", scheme://host[:port]) or "*" for any.
  explicit CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {}

  // Parses --allowed-origins: a comma-separated list or a JSON array of strings (vLLM's form,
  // '["*"]'). Each origin must be "*" or scheme://host[:port] without a path.
  static Result<std::vector<std::string>> parse_flag(std::string_view value);

  bool enabled() const { return !origins_.empty(); }
  bool allows(std::string_view origin) const;

  // Headers for the answer to a request from `origin` (none when CORS is off, the request has no
  // Origin, or the origin is not allowed: the browser then withholds the answer from the page).
  Headers response_headers(std::string_view origin) const;

  // A preflight: `request_method` and `request_headers` are the Access-Control-Request-* values.
  // 204 with the allowing headers for an allowed origin, 403 otherwise. Empty when CORS is off.
  struct Preflight {
    int status = 204;
    Headers headers;
    std::string error;  // 403: why
  };
  std::optional<Preflight> preflight(std::string_view origin, std::string_view request_method,
                                     std::string_view request_headers) const;

 private:
  std::vector<std::string> origins_;
};

}  // namespace hz
