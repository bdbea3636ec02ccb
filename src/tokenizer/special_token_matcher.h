// Finds special tokens (control, user-defined, unknown) in raw text before the subword model runs.
// User-defined tokens are always matched; control and unknown ones only when parsing specials.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace hz {

class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);

  struct Match {
    int32_t id = -1;
    size_t len = 0;  // 0: no match
  };
  // The longest special token starting at text[pos]. NOTE: scanning left to right with the
  // longest match at each position equals llama.cpp's "longest token text first" partition for
  // everything but overlapping special texts (e.g. "ab" and "bcd" in "abcd"), and is linear.
  Match longest_at(std::string_view text, size_t pos, bool parse_special) const;
  // Cheap filter: can any special token start with this byte?
  bool may_start(uint8_t c, bool parse_special) const {
    return parse_special ? first_any_[c] : first_always_[c];
  }
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    int32_t id = -1;        // token ending here, -1 if none
    bool always = false;    // the token is user-defined (matched even without parse_special)
  };
  int32_t child(int32_t node, uint8_t c) const;

  std::vector<Node> nodes_;  // [0] is the root
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  std::array<bool, 256> first_any_{};
  std::array<bool, 256> first_always_{};
};

}  // namespace hz
