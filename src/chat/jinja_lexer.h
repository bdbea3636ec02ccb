// Lexer of the chat-template language: splits a template into text and tag tokens, applying
// Jinja's whitespace control as transformers configures it (trim_blocks, lstrip_blocks, `-`/`+`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hz::jinja {

enum class TokenKind {
  kText,        // literal template text (after whitespace control)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the unescaped value
  kInt,
  kFloat,
  kOp,  // operators and punctuation: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
  kEof,
};

struct Token {
  TokenKind kind;
  std::string text;
  size_t offset;  // byte offset in the source, for line:col in errors
};

// "line L:C" (1-based) of a byte offset.
std::string describe_position(std::string_view source, size_t offset);

// Tokenizes a whole template; errors name line:col. `raw` blocks come out as text.
Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace hz::jinja
