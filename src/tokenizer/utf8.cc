#include "tokenizer/utf8.h"

namespace hz::utf8 {

size_t decode(const char* s, size_t n, uint32_t* cp) {
  if (n == 0) return 0;
  const auto* u = reinterpret_cast<const uint8_t*>(s);
  uint8_t c = u[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t v, min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((u[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (u[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

bool is_incomplete_prefix(const char* s, size_t n) {
  if (n == 0) return false;
  const auto* u = reinterpret_cast<const uint8_t*>(s);
  uint8_t c = u[0];
  size_t len;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
  } else {
    return false;
  }
  if (n >= len) return false;
  for (size_t i = 1; i < n; ++i) {
    if ((u[i] & 0xC0) != 0x80) return false;
  }
  // The second byte narrows the range for E0 (no overlongs), ED (no surrogates), F0, F4.
  if (n >= 2) {
    uint8_t d = u[1];
    if (c == 0xE0 && d < 0xA0) return false;
    if (c == 0xED && d > 0x9F) return false;
    if (c == 0xF0 && d < 0x90) return false;
    if (c == 0xF4 && d > 0x8F) return false;
  }
  return true;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp;
    size_t len = decode(s.data() + i, s.size() - i, &cp);
    if (len > 0) {
      out.append(s.data() + i, len);
      i += len;
      continue;
    }
    // A maximal invalid subsequence: the longest prefix that could have started a character,
    // at least one byte (the Unicode "substitution of maximal subparts" practice).
    size_t bad = 1;
    while (bad < 4 && i + bad < s.size() && is_incomplete_prefix(s.data() + i, bad + 1)) ++bad;
    append(out, kReplacementChar);
    i += bad;
  }
  return out;
}

}  // namespace hz::utf8
