// API-key check for /v1/*: `Authorization: Bearer KEY`, compared in constant time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hz {

// Compares without an early exit, so the time taken does not reveal how many leading bytes matched.
bool constant_time_equal(std::string_view a, std::string_view b);

// True when `authorization_header` is "Bearer <expected_key>" (scheme case-insensitive).
// An empty expected key means auth is off and everything passes.
bool is_authorized(std::string_view authorization_header, std::string_view expected_key);

// A request target fit for the access log: the value of every query parameter whose name says it
// carries a credential (key, token, auth, secret, password, signature...) becomes "REDACTED", and so
// does any occurrence of `api_key` (when set) anywhere in the target. Clients do send keys in URLs.
std::string redact_target(std::string_view target, std::string_view api_key = {});
// The same for every key of a server with several.
std::string redact_target(std::string_view target, const std::vector<std::string>& api_keys);

// Which of `keys` a request presents (`Authorization: Bearer KEY`, or Anthropic's `x-api-key`),
// as an index; -1 for none. Every key is compared in constant time.
int matching_key(std::string_view authorization_header, std::string_view x_api_key,
                 const std::vector<std::string>& keys);

}  // namespace hz
