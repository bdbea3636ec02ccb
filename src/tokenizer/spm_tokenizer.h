// SentencePiece-style subword model (tokenizer.ggml.model = llama): repeatedly merges the adjacent
// pair whose concatenation is the highest-scoring vocabulary entry; characters left without a
// token fall back to <0xNN> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace hz {

class SpmTokenizer {
 public:
  explicit SpmTokenizer(const Vocab& vocab);

  // Encodes one fragment of raw text (no special tokens in it). Applies the whitespace escaping
  // (' ' -> U+2581) and, when `space_prefix`, prepends one escaped space. O(n log n) in the input.
  void encode(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;

  // Byte value of a <0xNN> byte token, or -1.
  int byte_of(int32_t id) const;

 private:
  const Vocab& vocab_;
  std::array<int32_t, 256> byte_ids_{};  // token for each byte value (-1: none at all)
};

}  // namespace hz
