#include "tokenizer/spm_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"

namespace hz {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's escaped space

}  // namespace

SpmTokenizer::SpmTokenizer(const Vocab& vocab) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    int32_t id = vocab.find(fmt::format("<0x{:02X}>", b));
    if (id < 0) id = vocab.find(std::string(1, static_cast<char>(b)));
    if (id < 0) id = vocab.unk_id();
    byte_ids_[b] = id;
  }
}

int SpmTokenizer::byte_of(int32_t id) const {
  const std::string& t = vocab_.text(id);
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void SpmTokenizer::encode(std::string_view raw, bool space_prefix, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve((raw.size() + 1) * 3);
  if (space_prefix) text.append(kSpaceMark);
  for (char c : raw) {
    if (c == ' ') {
      text.append(kSpaceMark);
    } else {
      text.push_back(c);
    }
  }
  if (text.empty()) return;

  // One symbol per character. NOTE: a byte that does not start a valid character is a symbol of
  // its own (llama.cpp takes the length its lead byte announces, which can swallow the next
  // character, e.g. an escaped space, into byte fallback); valid UTF-8 splits the same either way.
  std::vector<MergeSymbol> symbols = split_symbols(text, [&](size_t offs) {
    uint32_t cp;
    return std::max<size_t>(utf8::decode(text.data() + offs, text.size() - offs, &cp), 1);
  });
  // Highest score of the merged piece first (the key is its negation; negating a float is exact).
  merge_symbols<float>(symbols, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<float> {
    int32_t id = vocab_.find(std::string_view(text).substr(l.start, l.len + r.len));
    if (id < 0) return std::nullopt;
    return -vocab_.score(id);
  });

  // Every merged symbol is a vocabulary entry by construction; only single characters can be
  // missing, and those fall back to one token per byte.
  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const MergeSymbol& s = symbols[i];
    std::string_view piece = std::string_view(text).substr(s.start, s.len);
    int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      int32_t bid = byte_ids_[static_cast<uint8_t>(c)];
      if (bid >= 0) out.push_back(bid);
    }
  }
}

}  // namespace hz
