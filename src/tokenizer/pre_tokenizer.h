// Pre-tokenizers of the byte-level BPE families, selected by tokenizer.ggml.pre: each is a sequence
// of regexes (PCRE2 with Unicode properties, compiled once per process and JIT-compiled when
// available). Each regex splits every current piece into its matches and the text between them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace hz {

class Regex;

class PreTokenizer {
 public:
  // `pre` is the value of tokenizer.ggml.pre ("" selects llama.cpp's "default" rules).
  static Result<PreTokenizer> create(std::string_view pre);

  // Splits `text` into pieces; appends their byte ranges [begin, end), in order, covering `text`.
  // Invalid UTF-8 never matches a regex item, so such bytes end up in pieces of their own kind.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const;

  // Llama 3: a pre-token that is itself a vocabulary entry is emitted whole, without merging.
  bool ignore_merges() const { return ignore_merges_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::vector<std::shared_ptr<const Regex>> regexes_;
  bool ignore_merges_ = false;
};

}  // namespace hz
