#include "tokenizer/spm_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <string>

#include "tokenizer/utf8.h"

namespace hz {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's escaped space

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t start;  // byte offset into the escaped text
  uint32_t len;    // 0 once merged into its left neighbour
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t len;  // combined length when queued; a mismatch later means the entry is stale
};

// Highest score first; among equal scores the leftmost pair (as SentencePiece and llama.cpp).
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

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
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    uint32_t cp;
    size_t len = std::max<size_t>(utf8::decode(text.data() + offs, text.size() - offs, &cp), 1);
    int32_t idx = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{idx - 1, offs + len == text.size() ? -1 : idx + 1, static_cast<uint32_t>(offs),
                             static_cast<uint32_t>(len)});
    offs += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    uint32_t len = symbols[left].len + symbols[right].len;
    int32_t id = vocab_.find(std::string_view(text).substr(symbols[left].start, len));
    if (id < 0) return;
    queue.push(Bigram{vocab_.score(id), left, right, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // Every merged symbol is a vocabulary entry by construction; only single characters can be
  // missing, and those fall back to one token per byte.
  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
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
