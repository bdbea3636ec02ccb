#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace hz {
namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t start;  // byte offset into the word
  uint32_t len;    // 0 once merged into its left neighbour
};

struct Bigram {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t len;  // combined length when queued; a mismatch later means the entry is stale
};

// Lowest rank first; among equal ranks (the same merge twice) the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(const Vocab& vocab) {
  auto pre = PreTokenizer::create(vocab.pre());
  if (!pre.ok()) return pre.status();
  return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(vocab, std::move(pre).value()));
}

void BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  pre_.split(text, pieces);
  std::string word;
  for (auto [b, e] : pieces) {
    word.clear();
    byte_level::encode(text.substr(b, e - b), word);
    encode_word(word, out);
  }
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (pre_.ignore_merges()) {
    int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t offs = 0; offs < word.size();) {
    size_t len = std::min(utf8::lead_len(static_cast<uint8_t>(word[offs])), word.size() - offs);
    int32_t idx = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{idx - 1, offs + len == word.size() ? -1 : idx + 1, static_cast<uint32_t>(offs),
                             static_cast<uint32_t>(len)});
    offs += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto text_of = [&](const Symbol& s) { return word.substr(s.start, s.len); };
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    int32_t rank = vocab_.merge_rank(text_of(symbols[left]), text_of(symbols[right]));
    if (rank < 0) return;
    queue.push(Bigram{rank, left, right, symbols[left].len + symbols[right].len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Bigram bg = queue.top();
    queue.pop();
    Symbol& l = symbols[bg.left];
    Symbol& r = symbols[bg.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    std::string_view piece = text_of(symbols[i]);
    int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // A merge produced a string the vocabulary lacks (inconsistent merges), or a byte has no
    // symbol in it (Falcon's and MPT's vocabularies lack the bytes UTF-8 never uses): fall back to
    // its characters and drop those the vocabulary cannot express, as llama.cpp does. NOTE: not
    // <unk>: MPT's unknown token is <|endoftext|>, which would end the document.
    for (size_t offs = 0; offs < piece.size();) {
      size_t len = std::min(utf8::lead_len(static_cast<uint8_t>(piece[offs])), piece.size() - offs);
      int32_t cid = vocab_.find(piece.substr(offs, len));
      if (cid >= 0) out.push_back(cid);
      offs += len;
    }
  }
}

}  // namespace hz
