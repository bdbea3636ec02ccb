// ApiError: an HTTP error answered with OpenAI's error object {"error": {message, type, param, code}}.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace hz {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;  // the request field at fault; empty -> null
  std::string type = "invalid_request_error";
  std::string code;   // empty -> null
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Retry-After
};

ApiError bad_request(std::string message, std::string param = {});
// The JSON body for `e`.
std::string api_error_body(const ApiError& e);
// Maps a Status from Engine::submit: kResourceExhausted -> 429 (+Retry-After), kCancelled -> 503,
// kOutOfRange / kInvalidArgument -> 400, anything else -> 500.
ApiError api_error_from_status(const Status& s);

}  // namespace hz
