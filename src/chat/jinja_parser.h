// Parser of the chat-template language: tokens -> syntax tree. Refuses constructs that need
// file access (include, import, extends) and nesting beyond the configured depth.
#pragma once

#include <string_view>

#include "chat/jinja_ast.h"

namespace hz::jinja {

// Parses a whole template. Errors name line:col. `max_depth` bounds block nesting and bracket
// nesting; expression trees are bounded to 4 * max_depth levels.
Result<Body> parse_template(std::string_view source, int max_depth);

}  // namespace hz::jinja
