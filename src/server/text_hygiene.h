// Text hygiene for request strings: strip a leading UTF-8 BOM, refuse invalid UTF-8 and NUL bytes,
// optionally turn CRLF into LF. Errors name the request field (e.g. "messages[1].content").
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace hz {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Cleans `text` in place. `field` names it in the error (kInvalidArgument).
Status clean_request_text(std::string& text, std::string_view field, bool normalize_newlines);

}  // namespace hz
