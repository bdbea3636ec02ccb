// Chat templates known by name for --chat-template (chatml, llama3, ...): for models whose file
// carries no template, or a wrong one.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace hz::cli {

// The Jinja source of a named template, or nullptr when `name` is not one.
const char* named_chat_template(std::string_view name);
// "chatml, llama2, ..." for help texts and errors.
std::string named_chat_template_list();

// What --chat-template gave: a built-in name, a file, or inline Jinja (as vLLM takes it).
struct ChatTemplateArg {
  std::string source;  // the Jinja text, checked to parse
  std::string origin;  // "built-in chatml", the file's path, or "inline (--chat-template)"
};
Result<ChatTemplateArg> resolve_chat_template_arg(const std::string& arg);

}  // namespace hz::cli
