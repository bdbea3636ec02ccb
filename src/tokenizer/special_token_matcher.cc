#include "tokenizer/special_token_matcher.h"

namespace hz {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  nodes_.emplace_back();
  for (int32_t id = 0; id < vocab.size(); ++id) {
    TokenType t = vocab.type(id);
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) continue;
    const std::string& text = vocab.text(id);
    int32_t node = 0;
    for (char ch : text) {
      auto c = static_cast<uint8_t>(ch);
      uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        nodes_.emplace_back();
        it = edges_.emplace(key, static_cast<int32_t>(nodes_.size() - 1)).first;
      }
      node = it->second;
    }
    nodes_[node].id = id;
    nodes_[node].always = t == TokenType::kUserDefined;
    auto first = static_cast<uint8_t>(text[0]);
    first_any_[first] = true;
    if (t == TokenType::kUserDefined) first_always_[first] = true;
  }
}

int32_t SpecialTokenMatcher::child(int32_t node, uint8_t c) const {
  auto it = edges_.find((static_cast<uint64_t>(node) << 8) | c);
  return it == edges_.end() ? -1 : it->second;
}

SpecialTokenMatcher::Match SpecialTokenMatcher::longest_at(std::string_view text, size_t pos,
                                                           bool parse_special) const {
  Match best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    const Node& n = nodes_[node];
    if (n.id >= 0 && (parse_special || n.always)) {
      best.id = n.id;
      best.len = i - pos + 1;
    }
  }
  return best;
}

}  // namespace hz
