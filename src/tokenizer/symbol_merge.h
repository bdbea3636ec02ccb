// Greedy pairwise merging shared by the BPE and SentencePiece tokenizers: the text is a linked list
// of symbols (one per character to start with); the adjacent pair with the best key merges first,
// ties going to the leftmost pair, until no pair has a key. The tokenizers differ only in the key
// (BPE: merge rank; SentencePiece: the merged piece's score) and in how they split characters.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace hz {

struct MergeSymbol {
  int32_t prev;
  int32_t next;
  uint32_t start;  // byte offset into the text
  uint32_t len;    // 0 once merged into its left neighbour
};

// One symbol per character of `text`; char_len(offset) gives the byte length (>= 1) of the
// character starting there, clamped by the caller to what is left of the text.
template <typename CharLen>
std::vector<MergeSymbol> split_symbols(std::string_view text, CharLen char_len) {
  std::vector<MergeSymbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    size_t len = char_len(offs);
    int32_t idx = static_cast<int32_t>(symbols.size());
    symbols.push_back(MergeSymbol{idx - 1, offs + len == text.size() ? -1 : idx + 1, static_cast<uint32_t>(offs),
                                  static_cast<uint32_t>(len)});
    offs += len;
  }
  return symbols;
}

// Merges `symbols` in place. key(left, right) returns the pair's key (smaller merges first) or
// nullopt when the pair cannot merge. Visit the result with `for (i = 0; i != -1; i = next)`.
template <typename Key, typename KeyFn>
void merge_symbols(std::vector<MergeSymbol>& symbols, KeyFn key) {
  struct Pair {
    Key key;
    int32_t left;
    int32_t right;
    uint32_t len;  // combined length when queued; a mismatch later means the entry is stale
  };
  auto worse = [](const Pair& a, const Pair& b) { return b.key < a.key || (!(a.key < b.key) && a.left > b.left); };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    std::optional<Key> k = key(symbols[left], symbols[right]);
    if (k) queue.push(Pair{*k, left, right, symbols[left].len + symbols[right].len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Pair p = queue.top();
    queue.pop();
    MergeSymbol& l = symbols[p.left];
    MergeSymbol& r = symbols[p.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }
}

}  // namespace hz
