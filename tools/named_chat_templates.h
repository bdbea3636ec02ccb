// Chat templates known by name for --chat-template (chatml, llama3, ...): for models whose file
// carries no template, or a wrong one.
#pragma once

#include <string>
#include <string_view>

namespace hz::cli {

// The Jinja source of a named template, or nullptr when `name` is not one.
const char* named_chat_template(std::string_view name);
// "chatml, llama2, ..." for help texts and errors.
std::string named_chat_template_list();

}  // namespace hz::cli
