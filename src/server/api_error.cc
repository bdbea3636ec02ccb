#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace hz {

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

std::string api_error_body(const ApiError& e) {
  nlohmann::json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  // `replace`: messages may quote client bytes; never let them make dump() throw.
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError api_error_from_status(const Status& s) {
  ApiError e;
  e.message = s.message();
  switch (s.code()) {
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      if (e.message.empty()) e.message = "the request queue is full; retry later";
      e.headers.emplace_back("Retry-After", "1");
      break;
    case StatusCode::kCancelled:
      e.http_status = 503;
      e.type = "service_unavailable";
      e.code = "server_shutting_down";
      if (e.message.empty()) e.message = "the server is shutting down";
      break;
    case StatusCode::kOutOfRange:
    case StatusCode::kInvalidArgument:
      e.http_status = 400;
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

}  // namespace hz
