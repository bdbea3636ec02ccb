// Text <-> token ids for GGUF vocabularies: SentencePiece-style (tokenizer.ggml.model = llama) and
// byte-level BPE (gpt2) with the pre-tokenizer named by tokenizer.ggml.pre; special tokens; BOS/EOS.
// Immutable after from_gguf: every const method is safe to call from several threads at once.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/text_range.h"
#include "format/gguf.h"
#include "tokenizer/special_token_matcher.h"
#include "tokenizer/streaming_detokenizer.h"  // part of the tokenizer API
#include "tokenizer/vocab.h"

namespace hz {

class SpmTokenizer;
class BpeTokenizer;

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* metadata only (vocabulary-only files work); errors name the key at fault.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& f);
  // From Hugging Face tokenizer.json (+ tokenizer_config.json, may be null JSON): converted to the
  // same GGUF metadata (format/hf_tokenizer_json.h), so both paths share one implementation.
  static Result<std::unique_ptr<Tokenizer>> from_hf(const nlohmann::json& tokenizer, const nlohmann::json& tokenizer_config);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: BOS/EOS as the vocabulary asks (add_bos()/add_eos()). parse_special: control
  // tokens written in the text (e.g. "<s>") become their ids; user-defined tokens always do.
  // Any byte sequence is accepted; invalid UTF-8 is tokenized as bytes.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true, bool parse_special = false) const;
  // Text that mixes trusted parts with plain ones (a chat prompt: the template's text and the
  // users' messages). Like encode(text, add_special, parse_special = true), except that a control
  // token is matched only where all its bytes lie outside `plain` (sorted, disjoint byte ranges);
  // inside them the text is encoded as with parse_special = false. Fragments between matched
  // special tokens are still encoded whole, across the plain/trusted boundaries, so the ids equal
  // encode()'s wherever no control token is written inside a plain range.
  std::vector<int32_t> encode_mixed(std::string_view text, std::span<const TextRange> plain, bool add_special = true) const;
  // Text that continues a sequence mid-way (text to insert after generated tokens): no BOS/EOS,
  // and no SentencePiece space prefix at its start, so the pieces concatenate to `text` exactly.
  std::vector<int32_t> encode_continuation(std::string_view text, bool parse_special) const;

  // The concatenated pieces. Like llama.cpp's detokenize: with the SentencePiece space prefix, the
  // first token loses one leading space; remove_special drops a leading BOS / trailing EOS (and
  // then keeps that space); unparse_special renders control tokens as their text. NOTE: no
  // "clean_up_tokenization_spaces" pass, so decode(encode(text, false)) == text. For generated
  // text shown incrementally use StreamingDetokenizer (pieces verbatim, like llama.cpp's output).
  std::string decode(const std::vector<int32_t>& ids, bool remove_special = false, bool unparse_special = false) const;

  // The bytes this token contributes to output text (control and unknown tokens: nothing, unless
  // `special`, then their text). Out-of-range ids give "".
  std::string token_to_piece(int32_t id) const;
  std::string token_to_piece(int32_t id, bool special) const;
  // The raw vocabulary entry ("" for out-of-range ids).
  const std::string& token_text(int32_t id) const;

  int32_t vocab_size() const { return vocab_.size(); }
  int32_t bos_id() const { return vocab_.bos_id(); }  // -1 when absent
  int32_t eos_id() const { return vocab_.eos_id(); }
  bool add_bos() const { return vocab_.add_bos(); }
  bool add_eos() const { return vocab_.add_eos(); }
  bool is_eog(int32_t id) const { return vocab_.is_eog(id); }
  bool is_control(int32_t id) const { return vocab_.valid_id(id) && vocab_.type(id) == TokenType::kControl; }
  const Vocab& vocab() const { return vocab_; }
  size_t max_token_bytes() const { return vocab_.max_token_bytes(); }

 private:
  explicit Tokenizer(Vocab vocab);
  // Encodes text that holds no special tokens. `after_special`: nothing or a special token
  // precedes it (SentencePiece then prefixes a space).
  void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  // encode() and encode_mixed(): specials parsed per parse_special outside `plain`, never inside.
  // `continues`: the text does not start a sequence (no space prefix before its first fragment).
  std::vector<int32_t> encode_impl(std::string_view text, bool add_special, bool parse_special,
                                   std::span<const TextRange> plain, bool continues = false) const;

  Vocab vocab_;
  SpecialTokenMatcher specials_;
  std::unique_ptr<SpmTokenizer> spm_;  // exactly one of spm_, bpe_ is set
  std::unique_ptr<BpeTokenizer> bpe_;
  std::vector<std::string> pieces_;  // token_to_piece(id, special = false), precomputed
};

}  // namespace hz
