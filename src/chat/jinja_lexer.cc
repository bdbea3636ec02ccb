// Lexer of the chat-template language (see jinja_lexer.h).
#include "chat/jinja_lexer.h"

#include <cstdint>

namespace hz::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;  // lone surrogates cannot be UTF-8
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Result<std::vector<Token>> run();

 private:
  Status error(size_t offset, const std::string& msg) {
    return invalid_argument("chat template syntax error at {}: {}", describe_position(src_, offset), msg);
  }
  bool at(size_t p, std::string_view s) const { return src_.substr(p, s.size()) == s; }
  void emit_text(std::string_view text, size_t text_start, size_t tag_pos);
  Status lex_tag(size_t open, bool is_block);
  Status lex_string(size_t& p);
  Status lex_number(size_t& p);
  // If a `{% raw %}` starts at `p` (just after the opener and its modifier), emits its content.
  Result<bool> try_raw(size_t open, size_t p);
  void after_closer(char modifier, bool is_block);

  std::string_view src_;
  size_t pos_ = 0;
  bool strip_next_ = false;    // previous tag ended with `-`: strip all leading whitespace
  bool trim_newline_ = false;  // trim_blocks: drop one newline after a block or comment tag
  std::vector<Token> tokens_;
};

// Applies the pending leading strip of the text before a tag, and the trailing strip the tag
// asks for (`{%-`, or lstrip_blocks for `{%`/`{#` without `+`).
void Lexer::emit_text(std::string_view text, size_t text_start, size_t tag_pos) {
  if (strip_next_) {
    size_t i = 0;
    while (i < text.size() && is_space(text[i])) ++i;
    text.remove_prefix(i);
    text_start += i;
  } else if (trim_newline_) {
    if (!text.empty() && text[0] == '\n') {
      text.remove_prefix(1);
      ++text_start;
    } else if (text.size() >= 2 && text[0] == '\r' && text[1] == '\n') {
      text.remove_prefix(2);
      text_start += 2;
    }
  }
  strip_next_ = trim_newline_ = false;
  if (tag_pos < src_.size()) {
    char type = src_[tag_pos + 1];
    char mod = tag_pos + 2 < src_.size() ? src_[tag_pos + 2] : '\0';
    if (mod == '-') {
      while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    } else if ((type == '%' || type == '#') && mod != '+') {
      size_t nl = text.rfind('\n');
      size_t seg = nl == std::string_view::npos ? 0 : nl + 1;
      bool line_start = nl != std::string_view::npos || text_start == 0 || src_[text_start - 1] == '\n';
      bool blank = true;
      for (size_t i = seg; i < text.size(); ++i)
        if (text[i] != ' ' && text[i] != '\t') blank = false;
      if (line_start && blank) text = text.substr(0, seg);
    }
  }
  if (!text.empty()) tokens_.push_back({TokenKind::kText, std::string(text), text_start});
}

void Lexer::after_closer(char modifier, bool is_block) {
  if (modifier == '-') {
    strip_next_ = true;
  } else if (is_block && modifier != '+') {
    trim_newline_ = true;
  }
}

Result<std::vector<Token>> Lexer::run() {
  // keep_trailing_newline=False: a single trailing newline of the template is dropped.
  if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);
  while (pos_ < src_.size()) {
    size_t open = pos_;
    while (open < src_.size() &&
           !(src_[open] == '{' && open + 1 < src_.size() &&
             (src_[open + 1] == '{' || src_[open + 1] == '%' || src_[open + 1] == '#')))
      ++open;
    emit_text(src_.substr(pos_, open - pos_), pos_, open);
    if (open >= src_.size()) break;
    char type = src_[open + 1];
    size_t p = open + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    if (type == '#') {
      size_t end = src_.find("#}", p);
      if (end == std::string_view::npos) return error(open, "unclosed comment");
      char mod = end > p ? src_[end - 1] : '\0';
      pos_ = end + 2;
      after_closer(mod, true);
      continue;
    }
    if (type == '%') {
      HZ_ASSIGN_OR_RETURN(bool raw, try_raw(open, p));
      if (raw) continue;
    }
    pos_ = p;
    HZ_RETURN_IF_ERROR(lex_tag(open, type == '%'));
  }
  tokens_.push_back({TokenKind::kEof, "", src_.size()});
  return std::move(tokens_);
}

Result<bool> Lexer::try_raw(size_t open, size_t p) {
  while (p < src_.size() && is_space(src_[p])) ++p;
  if (!at(p, "raw")) return false;
  p += 3;
  while (p < src_.size() && is_space(src_[p])) ++p;
  char mod = '\0';
  if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) mod = src_[p++];
  if (!at(p, "%}")) return false;
  size_t body = p + 2;
  // Find `{% endraw %}` with optional modifiers.
  for (size_t q = src_.find("{%", body); q != std::string_view::npos; q = src_.find("{%", q + 2)) {
    size_t r = q + 2;
    char inner_mod = r < src_.size() ? src_[r] : '\0';
    if (inner_mod == '-' || inner_mod == '+') ++r;
    while (r < src_.size() && is_space(src_[r])) ++r;
    if (!at(r, "endraw")) continue;
    r += 6;
    while (r < src_.size() && is_space(src_[r])) ++r;
    char end_mod = '\0';
    if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_mod = src_[r++];
    if (!at(r, "%}")) continue;
    std::string_view content = src_.substr(body, q - body);
    if (mod == '-')
      while (!content.empty() && is_space(content.front())) content.remove_prefix(1);
    if (inner_mod == '-')
      while (!content.empty() && is_space(content.back())) content.remove_suffix(1);
    if (!content.empty()) tokens_.push_back({TokenKind::kText, std::string(content), body});
    pos_ = r + 2;
    after_closer(end_mod, true);
    return true;
  }
  return error(open, "unclosed raw block (missing {% endraw %})");
}

Status Lexer::lex_tag(size_t open, bool is_block) {
  tokens_.push_back({is_block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", open});
  int brace_depth = 0;
  size_t& p = pos_;
  for (;;) {
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p >= src_.size()) return error(open, is_block ? "unclosed block tag (missing %})" : "unclosed {{");
    char c = src_[p];
    char mod = '\0';
    size_t q = p;
    if (c == '-' || c == '+') {
      mod = c;
      ++q;
    }
    if (is_block ? at(q, "%}") : (brace_depth == 0 && at(q, "}}"))) {
      tokens_.push_back({is_block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", p});
      p = q + 2;
      after_closer(mod, is_block);
      return Status();
    }
    if (!is_block && at(p, "%}")) return error(p, "unexpected '%}' inside {{ }}");
    if (is_block && brace_depth == 0 && at(p, "}}")) return error(p, "unexpected '}}' inside {% %}");
    if (c == '\'' || c == '"') {
      HZ_RETURN_IF_ERROR(lex_string(p));
    } else if (is_digit(c)) {
      HZ_RETURN_IF_ERROR(lex_number(p));
    } else if (is_name_start(c)) {
      size_t s = p;
      while (p < src_.size() && is_name_char(src_[p])) ++p;
      tokens_.push_back({TokenKind::kName, std::string(src_.substr(s, p - s)), s});
    } else {
      static const char* kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
      bool matched = false;
      for (const char* op : kTwo) {
        if (at(p, op)) {
          tokens_.push_back({TokenKind::kOp, op, p});
          p += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
        return error(p, std::string("unexpected character '") + c + "'");
      if (c == '{') ++brace_depth;
      if (c == '}') --brace_depth;
      tokens_.push_back({TokenKind::kOp, std::string(1, c), p});
      ++p;
    }
  }
}

Status Lexer::lex_string(size_t& p) {
  size_t start = p;
  char quote = src_[p++];
  std::string out;
  for (;;) {
    if (p >= src_.size()) return error(start, "unterminated string literal");
    char c = src_[p++];
    if (c == quote) break;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (p >= src_.size()) return error(start, "unterminated string literal");
    char e = src_[p++];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case '0': out += '\0'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;  // line continuation
      case 'x':
      case 'u':
      case 'U': {
        int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 0; i < len; ++i) {
          int h = p + i < src_.size() ? hex_value(src_[p + i]) : -1;
          if (h < 0) return error(p - 2, std::string("invalid \\") + e + " escape");
          cp = cp * 16 + h;
        }
        if (cp > 0x10ffff) return error(p - 2, "escape outside the Unicode range");
        p += len;
        append_utf8(cp, out);
        break;
      }
      default:  // Python keeps unknown escapes as written
        out += '\\';
        out += e;
    }
  }
  tokens_.push_back({TokenKind::kString, std::move(out), start});
  return Status();
}

Status Lexer::lex_number(size_t& p) {
  size_t start = p;
  std::string digits;
  auto take_digits = [&] {
    while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
      if (src_[p++] != '_') digits += src_[p - 1];
  };
  take_digits();
  bool is_float = false;
  if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
    is_float = true;
    digits += src_[p++];
    take_digits();
  }
  if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
    size_t q = p + 1;
    if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
    if (q < src_.size() && is_digit(src_[q])) {
      is_float = true;
      digits += 'e';
      digits.append(src_.substr(p + 1, q - p - 1));
      p = q;
      take_digits();
    }
  }
  if (!is_float) {
    // Reject values beyond int64 here so the parser can convert without checks.
    if (digits.size() > 19 || (digits.size() == 19 && digits > "9223372036854775807"))
      return error(start, "integer literal too large");
  }
  tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInt, std::move(digits), start});
  return Status();
}

}  // namespace

std::string describe_position(std::string_view source, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ":" + std::to_string(col);
}

Result<std::vector<Token>> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace hz::jinja
