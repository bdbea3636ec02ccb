// The web pages compiled into the binary from web/ (a chat page at `/`, a status page at `/status`)
// and how they are served: content types, ETag revalidation, a strict Content-Security-Policy.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "server/api_handler.h"

namespace hz {

// One file of web/, embedded at build time by cmake/embed_files.cmake.
struct EmbeddedFile {
  std::string_view name;    // file name in web/, e.g. "chat.js"
  std::string_view body;    // its bytes
  std::string_view sha256;  // hex digest of body, the ETag
};

// Every embedded file, sorted by name. Defined in the generated web_files.cc.
std::span<const EmbeddedFile> embedded_web_files();

// The embedded file served at `path` ("/" -> index.html, "/status" -> status.html, "/<name>" for
// scripts, styles and images), or null.
const EmbeddedFile* find_web_file(std::string_view path);

// The reply for a web page path, or nullopt when `path` is none of them. `if_none_match` is the
// request's If-None-Match header: a match gets 304 without a body.
std::optional<HttpReply> web_file_reply(std::string_view method, std::string_view path, std::string_view if_none_match);

}  // namespace hz
