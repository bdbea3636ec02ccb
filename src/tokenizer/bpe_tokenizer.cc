#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"

namespace hz {
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

  std::vector<MergeSymbol> symbols = split_symbols(
      word, [&](size_t offs) { return std::min(utf8::lead_len(static_cast<uint8_t>(word[offs])), word.size() - offs); });
  auto text_of = [&](const MergeSymbol& s) { return word.substr(s.start, s.len); };
  // Lowest merge rank first.
  merge_symbols<int32_t>(symbols, [&](const MergeSymbol& l, const MergeSymbol& r) -> std::optional<int32_t> {
    int32_t rank = vocab_.merge_rank(text_of(l), text_of(r));
    if (rank < 0) return std::nullopt;
    return rank;
  });

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
