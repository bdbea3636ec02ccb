#include "tokenizer/tokenizer.h"

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/utf8.h"

namespace hz {
namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)), specials_(vocab_) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& f) {
  HZ_ASSIGN_OR_RETURN(Vocab vocab, Vocab::from_gguf(f));
  std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab)));
  const Vocab& v = tok->vocab_;
  if (v.kind() == VocabKind::kSpm) {
    tok->spm_ = std::make_unique<SpmTokenizer>(v);
  } else {
    auto bpe = BpeTokenizer::create(v);
    if (!bpe.ok()) return bpe.status().with_context(f.path());
    tok->bpe_ = std::move(bpe).value();
  }

  tok->pieces_.resize(v.size());
  for (int32_t id = 0; id < v.size(); ++id) {
    const std::string& text = v.text(id);
    std::string& piece = tok->pieces_[id];
    switch (v.type(id)) {
      case TokenType::kNormal:
        if (v.kind() == VocabKind::kSpm) {
          piece = text;
          replace_all(piece, "\xE2\x96\x81", " ");
        } else {
          piece = byte_level::decode(text);
        }
        break;
      case TokenType::kUserDefined:
        piece = text;
        break;
      case TokenType::kByte:
        if (tok->spm_) {
          int b = tok->spm_->byte_of(id);
          if (b >= 0) piece.assign(1, static_cast<char>(b));
        }
        break;
      default:  // control, unknown, unused, undefined: not part of the text
        break;
    }
  }
  return tok;
}

void Tokenizer::encode_fragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (spm_) {
    spm_->encode(text, vocab_.add_space_prefix() && after_special, out);
  } else {
    bpe_->encode(text, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode_impl(text, add_special, parse_special, {});
}

std::vector<int32_t> Tokenizer::encode_mixed(std::string_view text, std::span<const TextRange> plain,
                                             bool add_special) const {
  return encode_impl(text, add_special, /*parse_special=*/true, plain);
}

std::vector<int32_t> Tokenizer::encode_continuation(std::string_view text, bool parse_special) const {
  return encode_impl(text, /*add_special=*/false, parse_special, {}, /*continues=*/true);
}

std::vector<int32_t> Tokenizer::encode_impl(std::string_view text, bool add_special, bool parse_special,
                                            std::span<const TextRange> plain, bool continues) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos_id());

  bool after_special = !continues;  // the text start counts as a boundary (SentencePiece space prefix)
  size_t fragment_start = 0;
  size_t plain_idx = 0;  // the first plain range that ends after pos
  if (!specials_.empty()) {
    for (size_t pos = 0; pos < text.size();) {
      while (plain_idx < plain.size() && plain[plain_idx].end <= pos) ++plain_idx;
      const bool in_plain = plain_idx < plain.size() && plain[plain_idx].begin <= pos;
      const bool parse_here = parse_special && !in_plain;
      if (specials_.may_start(static_cast<uint8_t>(text[pos]), parse_here)) {
        SpecialTokenMatcher::Match m;
        if (parse_here && plain_idx < plain.size()) {
          // A control token must end before the next plain range; user-defined ones may run on.
          m = specials_.longest_at(text.substr(0, plain[plain_idx].begin), pos, /*parse_special=*/true);
          SpecialTokenMatcher::Match user = specials_.longest_at(text, pos, /*parse_special=*/false);
          if (user.len > m.len) m = user;
        } else {
          m = specials_.longest_at(text, pos, parse_here);
        }
        if (m.len > 0) {
          if (pos > fragment_start) {
            encode_fragment(text.substr(fragment_start, pos - fragment_start), after_special, out);
          }
          out.push_back(m.id);
          after_special = true;
          pos += m.len;
          fragment_start = pos;
          continue;
        }
      }
      ++pos;
    }
  }
  if (fragment_start < text.size()) encode_fragment(text.substr(fragment_start), after_special, out);

  if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos_id());
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const { return vocab_.valid_id(id) ? pieces_[id] : std::string(); }

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (!vocab_.valid_id(id)) return std::string();
  if (special) {
    TokenType t = vocab_.type(id);
    if (t == TokenType::kControl || t == TokenType::kUnknown) return vocab_.text(id);
  }
  return pieces_[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return vocab_.valid_id(id) ? vocab_.text(id) : kEmpty;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool remove_special, bool unparse_special) const {
  size_t begin = 0, end = ids.size();
  bool remove_space = vocab_.add_space_prefix();
  if (remove_special && vocab_.add_bos() && end > begin && ids[begin] == vocab_.bos_id()) {
    // llama.cpp keeps the space after an explicit BOS: the text did not start the sequence.
    remove_space = false;
    ++begin;
  }
  if (remove_special && vocab_.add_eos() && end > begin && ids[end - 1] == vocab_.eos_id()) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    std::string piece = token_to_piece(ids[i], unparse_special);
    size_t skip = remove_space && !piece.empty() && piece[0] == ' ' ? 1 : 0;
    out.append(piece, skip, std::string::npos);
    remove_space = false;
  }
  return out;
}

std::string StreamingDetokenizer::push(int32_t id) {
  pending_ += tok_.token_to_piece(id);
  return drain(false);
}

std::string StreamingDetokenizer::flush() { return drain(true); }

std::string StreamingDetokenizer::drain(bool final) {
  std::string out;
  size_t i = 0;
  const size_t n = pending_.size();
  while (i < n) {
    uint32_t cp;
    size_t len = utf8::decode(pending_.data() + i, n - i, &cp);
    if (len > 0) {
      out.append(pending_, i, len);
      i += len;
      continue;
    }
    if (!final && utf8::is_incomplete_prefix(pending_.data() + i, n - i)) break;  // wait for more bytes
    size_t bad = 1;
    while (bad < 4 && i + bad < n && utf8::is_incomplete_prefix(pending_.data() + i, bad + 1)) ++bad;
    utf8::append(out, utf8::kReplacementChar);
    i += bad;
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace hz
