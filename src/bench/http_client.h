// A minimal blocking HTTP/1.1 client for the serve benchmark: one request per connection, the
// body delivered to a callback as bytes arrive (chunked, Content-Length or until close), so that
// streamed tokens can be timed. POSIX sockets; http:// only.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hz::bench {

struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string base_path;  // without a trailing slash: "" or "/prefix"
};

// Parses "http://HOST[:PORT][/PATH]"; errors name `field`.
Result<HttpUrl> parse_http_url(const std::string& url, const std::string& field);

struct HttpRequest {
  std::string method = "POST";
  std::string path;  // appended to the URL's base path
  std::string body;
  std::string bearer_token;  // Authorization: Bearer ... when not empty
  int timeout_ms = 600000;   // per socket read/write
};

// Sends the request; `on_body` sees the decoded body piece by piece. Returns the HTTP status, or
// an error for connection, protocol and timeout failures.
Result<int> http_call(const HttpUrl& url, const HttpRequest& req, const std::function<void(std::string_view)>& on_body);

}  // namespace hz::bench
