// libFuzzer target for the tokenizers. Byte 0 picks the mode: a vocabulary (six real ones) and the
// add_special / parse_special flags, or "the rest is a GGUF file" (vocabulary loading). Checks: no
// crash, ids in range, exact round trips where the vocabulary can express every byte, streaming
// output always whole UTF-8 characters.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

const char* const kFamilies[] = {"llama-spm", "gpt-2", "llama-bpe", "deepseek-coder", "falcon", "mpt"};
constexpr int kNumFamilies = 6;

struct Loaded {
  std::unique_ptr<hz::GgufFile> file;
  std::unique_ptr<hz::Tokenizer> tok;
};

const hz::Tokenizer* tokenizer(int idx) {
  static Loaded loaded[kNumFamilies];
  Loaded& l = loaded[idx];
  if (!l.tok) {
    const char* env = std::getenv("HORIZON_SHARED_DIR");
    std::string dir = env && *env ? env : HORIZON_SHARED_DIR_DEFAULT;
    auto f = hz::GgufFile::open(dir + "/testdata/vocab/ggml-vocab-" + kFamilies[idx] + ".gguf");
    if (!f.ok()) __builtin_trap();
    l.file = std::make_unique<hz::GgufFile>(std::move(f).value());
    auto t = hz::Tokenizer::from_gguf(*l.file);
    if (!t.ok()) __builtin_trap();
    l.tok = std::move(t).value();
  }
  return l.tok.get();
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

// Loads the six vocabularies before the first input: under ASan the 128K-token ones take seconds,
// which must not count against the per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (int i = 0; i < kNumFamilies; ++i) tokenizer(i);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  if (mode >= 0xF0) {  // vocabulary loading from an arbitrary GGUF
    auto f = hz::GgufFile::parse(data + 1, size - 1, "fuzz.gguf");
    if (!f.ok()) return 0;
    auto tok = hz::Tokenizer::from_gguf(*f);
    if (!tok.ok()) return 0;
    for (int32_t id : (*tok)->encode("Hello world <s> \xF0\x9F\xA6\x99 123", true, true)) {
      check(id >= 0 && id < (*tok)->vocab_size());
    }
    return 0;
  }

  const int family = (mode & 0x0F) % kNumFamilies;
  const bool add_special = mode & 0x10;
  const bool parse_special = mode & 0x20;
  const hz::Tokenizer& tok = *tokenizer(family);
  std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) check(id >= 0 && id < tok.vocab_size());

  // gpt-2 and llama-bpe express every byte; without specials their round trip is exact.
  if ((family == 1 || family == 2) && !add_special && !parse_special) check(tok.decode(ids) == text);
  // SentencePiece: exact too, unless the text holds U+2581 (read as an escaped space).
  if (family == 0 && !add_special && !parse_special && text.find("\xE2\x96\x81") == std::string_view::npos) {
    check(tok.decode(ids) == text);
  }

  hz::StreamingDetokenizer detok(tok);
  for (int32_t id : ids) {
    std::string chunk = detok.push(id);
    check(hz::utf8::sanitize(chunk) == chunk);
  }
  std::string rest = detok.flush();
  check(hz::utf8::sanitize(rest) == rest);
  return 0;
}
