#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace hz {
namespace {

// The regexes as published in the families' tokenizer.json files (pre_tokenizer Split / ByteLevel
// patterns), in application order. PCRE2 reads \p{L}, \p{N}, \p{P} and \s with Unicode semantics.

// GPT-2's ByteLevel pattern (also GPT-NeoX/MPT, StarCoder, Falcon after their extra splits).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tiktoken cl100k-style): case-insensitive contractions, digits in groups of up to three.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but single digits.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek's CJK split: U+4E00-U+9FA5, U+0800-U+4E00, U+AC00-U+D7FF.
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// DeepSeek LLM's letter class (cased letters, listed explicitly in its tokenizer.json).
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekLlmPunct =
    R"(\s?[\x{21}-\x{2F}\x{3A}-\x{7E}\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

struct Rule {
  std::vector<const char*> names;
  std::vector<const char*> patterns;
  bool ignore_merges = false;
};

const std::vector<Rule>& rules() {
  static const std::vector<Rule> r = {
      // gpt-2 and the families whose tokenizer.json has only GPT-2's ByteLevel regex.
      {{"gpt-2", "mpt", "olmo", "jais", "phi-2", "roberta-bpe", "gigachat"}, {kGpt2}},
      // Llama 3: tokens the vocabulary holds whole are not re-merged ("ignore_merges": true).
      {{"llama-bpe", "llama3", "llama-v3", "falcon3"}, {kLlama3}, /*ignore_merges=*/true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"qwen2", "stablelm2", "megrez"}, {kQwen2}},
      // DeepSeek LLM: newlines, cased-letter runs, ASCII/CJK punctuation runs, trailing spaces,
      // CJK runs, digit runs, each an isolated split.
      {{"deepseek-llm"},
       {R"([\r\n])", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
      // DeepSeek Coder: newlines, letter runs, punctuation runs, CJK runs, single digits.
      {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      // Falcon: Punctuation(contiguous: Unicode P plus ASCII punctuation), ByteLevel, then digit
      // triples. NOTE: its tokenizer.json also lists Digits(individual_digits=false) after
      // ByteLevel; llama.cpp leaves that step out, and so do we: with it, " 4" in the Falcon
      // vectors would split into " " + "4" where the reference ids keep one token.
      {{"falcon"}, {R"([\p{P}$+<=>^~|`]+)", kGpt2, R"([0-9][0-9][0-9])"}},
      // StarCoder / Refact: Digits(individual_digits=true), then ByteLevel.
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", kGpt2}},
      // llama.cpp's rules for BPE vocabularies that name no pre-tokenizer.
      {{"default", ""}, {R"([\p{P}$+<=>^~|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
  };
  return r;
}

}  // namespace

Result<PreTokenizer> PreTokenizer::create(std::string_view pre) {
  for (const Rule& rule : rules()) {
    for (const char* name : rule.names) {
      if (pre != name) continue;
      PreTokenizer p;
      p.name_ = std::string(pre.empty() ? "default" : pre);
      p.ignore_merges_ = rule.ignore_merges;
      for (const char* pattern : rule.patterns) {
        auto re = Regex::get(pattern);
        if (!re.ok()) return re.status();
        p.regexes_.push_back(std::move(re).value());
      }
      return p;
    }
  }
  return unimplemented("'tokenizer.ggml.pre' = '{}' is not a known pre-tokenizer", pre);
}

void PreTokenizer::split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const {
  std::vector<std::pair<size_t, size_t>> cur = {{0, text.size()}};
  std::vector<std::pair<size_t, size_t>> next;
  if (text.empty()) return;
  for (const auto& re : regexes_) {
    next.clear();
    for (auto [b, e] : cur) {
      std::string_view piece = text.substr(b, e - b);
      size_t pos = 0;      // search position within the piece
      size_t emitted = 0;  // end of what has been emitted so far
      while (pos < piece.size()) {
        size_t mb, me;
        if (!re->find(piece, pos, &mb, &me)) break;
        if (me == mb) {  // an empty match splits nothing; step over one character
          uint32_t cp;
          size_t len = utf8::decode(piece.data() + mb, piece.size() - mb, &cp);
          pos = mb + (len ? len : 1);
          continue;
        }
        if (mb > emitted) next.emplace_back(b + emitted, b + mb);
        next.emplace_back(b + mb, b + me);
        emitted = pos = me;
      }
      if (emitted < piece.size()) next.emplace_back(b + emitted, e);
    }
    cur.swap(next);
  }
  pieces.insert(pieces.end(), cur.begin(), cur.end());
}

}  // namespace hz
