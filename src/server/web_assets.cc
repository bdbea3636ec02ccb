#include "server/web_assets.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace hz {
namespace {

// Pages load only their own scripts and styles: no inline script or style, no other origin, no
// framing. Model output is put into the page as text, so this is the second line of defence.
constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string_view content_type_for(std::string_view name) {
  auto ends_with = [name](std::string_view ext) { return name.ends_with(ext); };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// True when an If-None-Match value ("*", or a list of possibly weak tags) names `etag`.
bool etag_matches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view tag = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);  // weak comparison, as RFC 9110 asks for GET
    if (tag == "*" || tag == etag) return true;
  }
  return false;
}

}  // namespace

const EmbeddedFile* find_web_file(std::string_view path) {
  std::string_view name;
  if (path == "/") {
    name = "index.html";
  } else if (path == "/status") {
    name = "status.html";
  } else if (path.size() > 1 && path.find('/', 1) == std::string_view::npos && !path.ends_with(".html")) {
    name = path.substr(1);  // pages are served only under their route, not as /x.html
  } else {
    return nullptr;
  }
  auto files = embedded_web_files();
  auto it = std::find_if(files.begin(), files.end(), [name](const EmbeddedFile& f) { return f.name == name; });
  return it == files.end() ? nullptr : &*it;
}

std::optional<HttpReply> web_file_reply(std::string_view method, std::string_view path, std::string_view if_none_match) {
  const EmbeddedFile* file = find_web_file(path);
  if (file == nullptr) return std::nullopt;
  if (method != "GET") {
    ApiError e;
    e.http_status = 405;
    e.message = "method not allowed; use GET";
    e.headers.emplace_back("Allow", "GET");
    return ApiHandler::error_reply(e);
  }
  HttpReply r;
  std::string etag = fmt::format("\"{}\"", file->sha256.substr(0, 20));
  r.content_type = std::string(content_type_for(file->name));
  // Revalidate on every use: a new binary may serve new files under the same names, and a 304 is cheap.
  r.headers = {{"ETag", etag},
               {"Cache-Control", "no-cache"},
               {"Content-Security-Policy", std::string(kContentSecurityPolicy)},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"}};
  if (!if_none_match.empty() && etag_matches(if_none_match, etag)) {
    r.status = 304;
    return r;
  }
  r.body = std::string(file->body);
  return r;
}

}  // namespace hz
