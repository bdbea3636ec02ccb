#include "grammar/token_vocab.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace hz::grammar {

TokenVocab::TokenVocab(std::vector<std::string> pieces, std::vector<int32_t> eog_ids)
    : pieces_(std::move(pieces)), eog_ids_(std::move(eog_ids)) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < size(); ++id) {
    if (!pieces_[id].empty()) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return pieces_[a] < pieces_[b] || (pieces_[a] == pieces_[b] && a < b); });
  Trie& t = trie_;
  t.tokens = ids;
  // Root.
  t.byte.push_back(0);
  t.depth.push_back(0);
  t.end.push_back(0);
  t.tok_begin.push_back(0);
  t.num_here.push_back(0);
  std::vector<uint32_t> path{0};  // open nodes from the root
  const std::string* prev = nullptr;
  for (uint32_t k = 0; k < ids.size(); ++k) {
    const std::string& s = pieces_[ids[k]];
    size_t common = 0;
    if (prev != nullptr) {
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() > common + 1) {
      t.end[path.back()] = static_cast<uint32_t>(t.byte.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(s[d]));
      t.depth.push_back(static_cast<uint16_t>(std::min<size_t>(d + 1, 65535)));
      t.end.push_back(0);
      t.tok_begin.push_back(k);
      t.num_here.push_back(0);
    }
    ++t.num_here[path.back()];
    t.max_depth = std::max(t.max_depth, s.size());
    prev = &s;
  }
  while (!path.empty()) {
    t.end[path.back()] = static_cast<uint32_t>(t.byte.size());
    path.pop_back();
  }
  t.tok_begin.push_back(static_cast<uint32_t>(ids.size()));  // sentinel: one past the last node
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tok) {
  const Vocab& v = tok.vocab();
  std::vector<std::string> pieces(v.size());
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < v.size(); ++id) {
    if (v.is_eog(id)) {
      eog.push_back(id);
      continue;
    }
    const TokenType type = v.type(id);
    if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused) continue;
    const std::string& text = v.text(id);
    // User-defined tokens written like markup (<|tool_call|>, [INST]) are special in practice.
    if (type == TokenType::kUserDefined && text.size() > 2 &&
        ((text.front() == '<' && text.back() == '>') || (text.front() == '[' && text.back() == ']')))
      continue;
    pieces[id] = tok.token_to_piece(id);
  }
  return std::make_shared<const TokenVocab>(std::move(pieces), std::move(eog));
}

}  // namespace hz::grammar
