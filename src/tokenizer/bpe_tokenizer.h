// Byte-level BPE (tokenizer.ggml.model = gpt2): pre-tokenize with the family's regexes, map bytes
// to GPT-2's byte alphabet, then merge adjacent symbols by merge rank (lowest first).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace hz {

class BpeTokenizer {
 public:
  // Fails (naming tokenizer.ggml.pre) for pre-tokenizers it does not know.
  static Result<std::unique_ptr<BpeTokenizer>> create(const Vocab& vocab);

  // Encodes one fragment of raw text (no special tokens in it). O(n log n) in the input.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  BpeTokenizer(const Vocab& vocab, PreTokenizer pre) : vocab_(vocab), pre_(std::move(pre)) {}
  // Merges one pre-token (already byte-level encoded) and appends its ids.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  PreTokenizer pre_;
};

}  // namespace hz
