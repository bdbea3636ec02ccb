// Command lines written for llama-server and vLLM: their multi-letter single-dash flags (-np,
// -ctk, -fa ...) rewritten to horizon's long names before parsing, and a hint naming horizon's
// equivalent when such a user types a flag horizon does not have.
#pragma once

#include <string>
#include <vector>

namespace hz::cli {

// argv[1..] with llama.cpp's single-dash long flags spelled as horizon's long flags; a bare
// -fa/--flash-attn (the older llama-server form) gets the value "on".
std::vector<std::string> rewrite_compat_args(const std::vector<std::string>& args);

// For an argument the parser did not expect: what to type instead, or "" when it is not a flag
// of llama-server or vLLM that horizon knows about.
std::string compat_hint(const std::string& arg);

// Levenshtein distance (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace hz::cli
