// UTF-8 helpers shared by the tokenizers and the streaming detokenizer: strict decoding (invalid
// sequences reported, never thrown), encoding, and the length a lead byte announces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hz::utf8 {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Length announced by a lead byte: 1 for ASCII and for bytes that cannot start a character
// (continuation bytes, 0xF8..0xFF), 2..4 otherwise. The SentencePiece tokenizer splits its input
// with this, as SentencePiece itself does, so invalid input still advances.
inline size_t lead_len(uint8_t c) {
  if (c < 0xC0) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  if (c < 0xF8) return 4;
  return 1;
}

// Decodes one character at s[0..n). Returns its length (1..4) and sets *cp, or returns 0 when the
// bytes do not start a valid character (overlong forms, surrogates, > U+10FFFF, truncation).
size_t decode(const char* s, size_t n, uint32_t* cp);

// True when s[0..n) is a proper prefix of some valid character (more bytes could complete it).
bool is_incomplete_prefix(const char* s, size_t n);

void append(std::string& out, uint32_t cp);

// Replaces each maximal invalid subsequence with U+FFFD.
std::string sanitize(std::string_view s);

}  // namespace hz::utf8
