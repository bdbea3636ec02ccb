// Tokenizer behaviour beyond the reference vectors: round trips on random text and bytes, the
// streaming detokenizer, special tokens, BOS/EOS, bad vocabularies, concurrent use.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "format/gguf.h"
#include "base/check.h"
#include "support/test_support.h"
#include "tokenizer/utf8.h"

namespace hz {
namespace {

const std::vector<std::string> kFamilies = {"llama-spm", "gpt-2", "deepseek-coder", "falcon", "mpt", "llama-bpe"};

// Vocabularies are loaded once per test binary (llama-bpe's takes a fraction of a second).
const Tokenizer& load(const std::string& family) {
  static std::map<std::string, std::pair<std::unique_ptr<GgufFile>, std::unique_ptr<Tokenizer>>> cache;
  auto it = cache.find(family);
  if (it == cache.end()) {
    auto f = GgufFile::open(test::testdata_path("vocab/ggml-vocab-" + family + ".gguf"));
    HZ_CHECK(f.ok());
    auto file = std::make_unique<GgufFile>(std::move(f).value());
    auto tok = Tokenizer::from_gguf(*file);
    HZ_CHECK(tok.ok());
    it = cache.emplace(family, std::make_pair(std::move(file), std::move(tok).value())).first;
  }
  return *it->second.second;
}

// Random valid UTF-8 drawn from scripts the vocabularies cover unevenly: ASCII (with runs of
// spaces, tabs, newlines, digits, punctuation), Latin-1, Cyrillic, CJK, Hangul, emoji, combining
// marks, ZWJ. U+2581 is excluded: SentencePiece reads it as an escaped space.
std::string random_utf8(std::mt19937& rng, size_t num_chars) {
  static const std::pair<uint32_t, uint32_t> kRanges[] = {
      {0x20, 0x7E}, {0x20, 0x20}, {0x30, 0x39}, {0x09, 0x0A}, {0xA0, 0xFF}, {0x400, 0x4FF},
      {0x4E00, 0x9FA5}, {0xAC00, 0xD7A3}, {0x1F300, 0x1F64F}, {0x300, 0x36F}, {0x200D, 0x200D}, {0xFF01, 0xFF5E},
  };
  std::string s;
  for (size_t i = 0; i < num_chars; ++i) {
    auto [lo, hi] = kRanges[rng() % std::size(kRanges)];
    uint32_t cp = lo + rng() % (hi - lo + 1);
    utf8::append(s, cp);
  }
  return s;
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

class FamilyTest : public ::testing::TestWithParam<std::string> {};

std::vector<uint8_t> expressible_bytes(const Tokenizer& tok);

TEST_P(FamilyTest, RoundTripsRandomUtf8) {
  const Tokenizer& tok = load(GetParam());
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 200; ++iter) {
    std::string text = random_utf8(rng, rng() % 64);
    std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
    ASSERT_EQ(tok.decode(ids), text) << "iteration " << iter;
  }
}

// The bytes a vocabulary can express: those that come back from decode(encode(byte)).
std::vector<uint8_t> expressible_bytes(const Tokenizer& tok) {
  std::vector<uint8_t> bytes;
  for (int b = 0; b < 256; ++b) {
    std::string s(1, static_cast<char>(b));
    if (tok.decode(tok.encode(s, false)) == s) bytes.push_back(static_cast<uint8_t>(b));
  }
  return bytes;
}

TEST_P(FamilyTest, ExpressesTheBytesItsVocabularyHas) {
  std::vector<uint8_t> bytes = expressible_bytes(load(GetParam()));
  std::vector<uint8_t> missing;
  for (int b = 0, k = 0; b < 256; ++b) {
    if (k < static_cast<int>(bytes.size()) && bytes[k] == b) {
      ++k;
    } else {
      missing.push_back(static_cast<uint8_t>(b));
    }
  }
  // Never used by UTF-8: C0, C1, F5..FF. Falcon's and MPT's vocabularies have no symbols for them
  // (Falcon also lacks F2 and most control characters), so those bytes are dropped, as in
  // llama.cpp; DeepSeek Coder lists their symbols a second time as user-defined tokens, which
  // decode as their text.
  const std::vector<uint8_t> kNeverInUtf8 = {0xC0, 0xC1, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF};
  const std::map<std::string, std::vector<uint8_t>> kMissing = {
      {"llama-spm", {}},
      {"gpt-2", {}},
      {"llama-bpe", {}},
      {"deepseek-coder", kNeverInUtf8},
      {"mpt", kNeverInUtf8},
      {"falcon", {0x03, 0x04, 0x05, 0x0B, 0x11, 0x13, 0x14, 0x15, 0x16, 0x17, 0x19, 0x1C, 0x1D, 0x1E, 0xC0, 0xC1, 0xF2,
                  0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF}},
  };
  EXPECT_EQ(missing, kMissing.at(GetParam()));
}

TEST_P(FamilyTest, RoundTripsRandomBytes) {
  const Tokenizer& tok = load(GetParam());
  std::vector<uint8_t> alphabet = expressible_bytes(tok);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 200; ++iter) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) c = static_cast<char>(alphabet[rng() % alphabet.size()]);
    if (text.find("\xE2\x96\x81") != std::string::npos) continue;  // an escaped space for SentencePiece
    std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
    ASSERT_EQ(tok.decode(ids), text) << "iteration " << iter;
  }
  // Bytes outside the alphabet never crash and never produce out-of-range ids.
  for (int iter = 0; iter < 50; ++iter) {
    std::string text = random_bytes(rng, rng() % 256);
    for (int32_t id : tok.encode(text, true, true)) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
  }
}

TEST_P(FamilyTest, RoundTripsLongRuns) {
  const Tokenizer& tok = load(GetParam());
  std::vector<uint8_t> alphabet = expressible_bytes(tok);
  std::mt19937 rng(7);
  std::string bytes(1 << 16, '\0');
  for (char& c : bytes) c = static_cast<char>(alphabet[rng() % alphabet.size()]);
  for (const std::string& text : {std::string(1 << 16, 'a'), std::string(1 << 16, ' '), std::string(1 << 16, '\n'),
                                  random_utf8(rng, 1 << 14), bytes}) {
    if (text.find("\xE2\x96\x81") != std::string::npos) continue;
    std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false);
    std::string back = tok.decode(ids);
    EXPECT_TRUE(back == text) << "length " << text.size() << " came back as length " << back.size();
  }
}

TEST_P(FamilyTest, StreamingNeverSplitsACharacter) {
  const Tokenizer& tok = load(GetParam());
  std::mt19937 rng(42);
  for (int iter = 0; iter < 100; ++iter) {
    std::string text = random_utf8(rng, 1 + rng() % 48);
    std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true);
    StreamingDetokenizer detok(tok);
    std::string streamed, pieces;
    for (int32_t id : ids) {
      std::string chunk = detok.push(id);
      ASSERT_EQ(utf8::sanitize(chunk), chunk) << "a chunk is not whole UTF-8 characters";
      streamed += chunk;
      pieces += tok.token_to_piece(id);
    }
    streamed += detok.flush();
    EXPECT_EQ(streamed, pieces);  // valid input: nothing replaced, nothing lost
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, FamilyTest, ::testing::ValuesIn(kFamilies), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n) c = (c == '-') ? '_' : c;
  return n;
});

TEST(StreamingDetokenizerTest, HoldsBackByteTokensUntilTheCharacterCompletes) {
  const Tokenizer& tok = load("llama-spm");
  std::vector<int32_t> ids = tok.encode("\xF0\x9F\xA6\x99", /*add_special=*/false);  // U+1F999 (llama)
  ASSERT_EQ(ids, (std::vector<int32_t>{29871, 243, 162, 169, 156}));             // "▁" + 4 byte tokens
  StreamingDetokenizer detok(tok);
  EXPECT_EQ(detok.push(ids[0]), " ");
  EXPECT_EQ(detok.push(ids[1]), "");
  EXPECT_EQ(detok.push(ids[2]), "");
  EXPECT_EQ(detok.push(ids[3]), "");
  EXPECT_EQ(detok.push(ids[4]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(detok.flush(), "");
}

TEST(StreamingDetokenizerTest, ReplacesInvalidBytes) {
  const Tokenizer& tok = load("llama-spm");
  const int32_t byte_ff = 3 + 0xFF, byte_e2 = 3 + 0xE2, byte_41 = 3 + 0x41;  // <0xNN> tokens start at id 3
  ASSERT_EQ(tok.token_text(byte_ff), "<0xFF>");
  StreamingDetokenizer detok(tok);
  EXPECT_EQ(detok.push(byte_ff), "\xEF\xBF\xBD");  // can never be valid: replaced at once
  EXPECT_EQ(detok.push(byte_e2), "");              // may still complete
  EXPECT_EQ(detok.push(byte_41), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(detok.push(byte_e2), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.flush(), "");
}

TEST(SpecialTokensTest, ControlTokensOnlyWhenParsingSpecials) {
  const Tokenizer& tok = load("llama-bpe");
  const std::string text = "<|begin_of_text|>Hi<|eot_id|>";
  std::vector<int32_t> plain = tok.encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 128000), 0);
  EXPECT_EQ(tok.decode(plain), text);
  std::vector<int32_t> parsed = tok.encode(text, false, true);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0], 128000);
  EXPECT_EQ(parsed[2], 128009);
  EXPECT_EQ(tok.decode(parsed), "Hi");  // control tokens render as nothing by default
  EXPECT_EQ(tok.decode(parsed, false, /*unparse_special=*/true), text);
  EXPECT_TRUE(tok.is_control(128009));
  EXPECT_FALSE(tok.is_control(parsed[1]));
}

TEST(SpecialTokensTest, UserDefinedTokensAlwaysMatch) {
  const Tokenizer& mpt = load("mpt");
  // MPT's runs of spaces are user-defined tokens (50254 = 24 spaces ... 50276 = 2 spaces).
  EXPECT_EQ(mpt.encode("a" + std::string(30, ' ') + "b", false, false),
            (std::vector<int32_t>{66, 50254, 50272, 67}));
  const Tokenizer& dsc = load("deepseek-coder");
  std::vector<int32_t> ids = dsc.encode("x\xC3\xB5y", false, false);  // "õ" is user-defined 32000
  EXPECT_NE(std::find(ids.begin(), ids.end(), 32000), ids.end());
}

TEST(SpecialTokensTest, SentencePieceSpacePrefixAfterSpecial) {
  const Tokenizer& tok = load("llama-spm");
  // As llama.cpp: the text after a special token is a new fragment and gets the space prefix.
  EXPECT_EQ(tok.encode("<s>Hello", false, true), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(tok.encode("<s>Hello", false, false), (std::vector<int32_t>{529, 29879, 29958, 10994}));
}

// Text inserted after generated tokens (a forced </think>, a message): its pieces are the text,
// with no space prefix and no BOS, in every family; after a special token inside it the next
// fragment still starts a new word, as encode() writes it.
TEST_P(FamilyTest, ContinuationPiecesAreTheText) {
  const Tokenizer& tok = load(GetParam());
  for (const std::string text : {"</think>", " Time is up.", "x", "\nDone.\n", ""}) {
    std::string pieces;
    for (int32_t id : tok.encode_continuation(text, /*parse_special=*/true)) pieces += tok.token_to_piece(id, true);
    EXPECT_EQ(pieces, text) << GetParam();
  }
}

TEST(SpecialTokensTest, ContinuationHasNoSpacePrefix) {
  const Tokenizer& tok = load("llama-spm");
  EXPECT_EQ(tok.decode(tok.encode("Hello", false, false), false), "Hello");  // the prefix is removed by decode
  EXPECT_EQ(tok.token_to_piece(tok.encode("Hello", false, false)[0]), " Hello");
  EXPECT_EQ(tok.token_to_piece(tok.encode_continuation("Hello", false)[0]).substr(0, 1), "H");
  EXPECT_EQ(tok.encode_continuation("<s>Hello", true), tok.encode("<s>Hello", false, true));
}

TEST(BosEosTest, FollowsTheVocabulary) {
  const Tokenizer& spm = load("llama-spm");
  EXPECT_TRUE(spm.add_bos());
  EXPECT_FALSE(spm.add_eos());
  EXPECT_EQ(spm.encode("Hello"), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(spm.encode(""), (std::vector<int32_t>{1}));
  EXPECT_EQ(spm.encode("", false), (std::vector<int32_t>{}));
  // As llama.cpp's detokenize: only the very first token loses its space prefix (here the BOS,
  // which renders as nothing).
  EXPECT_EQ(spm.decode({1, 15043}), " Hello");
  EXPECT_EQ(spm.decode({15043, 3186}), "Hello world");
  // llama.cpp keeps the space after a BOS it removes as special.
  EXPECT_EQ(spm.decode({1, 15043}, /*remove_special=*/true), " Hello");

  const Tokenizer& gpt2 = load("gpt-2");
  EXPECT_FALSE(gpt2.add_bos());
  EXPECT_EQ(gpt2.bos_id(), 50256);
  EXPECT_EQ(gpt2.encode("Hello"), gpt2.encode("Hello", false));
  EXPECT_TRUE(gpt2.is_eog(50256));

  const Tokenizer& l3 = load("llama-bpe");
  EXPECT_TRUE(l3.add_bos());
  EXPECT_EQ(l3.encode("Hello").front(), 128000);
  EXPECT_TRUE(l3.is_eog(128001));
  EXPECT_TRUE(l3.is_eog(128009));  // <|eot_id|>, found by its text
  EXPECT_FALSE(l3.is_eog(128000));
}

TEST(TokenizerTest, OutOfRangeIdsDecodeToNothing) {
  const Tokenizer& tok = load("gpt-2");
  EXPECT_EQ(tok.token_to_piece(-1), "");
  EXPECT_EQ(tok.token_to_piece(1 << 30), "");
  EXPECT_EQ(tok.token_text(tok.vocab_size()), "");
  EXPECT_EQ(tok.decode({-5, 15496, 99999999}), "Hello");
}

TEST(TokenizerTest, ConcurrentEncodeMatchesSerial) {
  const Tokenizer& tok = load("llama-bpe");
  std::mt19937 rng(5);
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) texts.push_back(random_utf8(rng, 200));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok.encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          size_t k = (i + t * 7) % texts.size();
          if (tok.encode(texts[k]) != expected[k] || tok.decode(expected[k]).empty()) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

// --- vocabularies written in memory, to check the errors name the key at fault ---

struct MiniVocab {
  std::string model = "gpt2";
  std::vector<std::string> tokens = {"a", "b", "ab", "<s>"};
  std::vector<int32_t> types = {1, 1, 1, 3};
  std::vector<std::string> merges = {"a b"};
  std::vector<float> scores;
};

Result<std::unique_ptr<Tokenizer>> build(const MiniVocab& m, const std::function<void(GgufWriter&)>& edit = nullptr) {
  GgufWriter w;
  w.set_str("general.architecture", "llama");
  if (!m.model.empty()) w.set_str("tokenizer.ggml.model", m.model);
  if (!m.tokens.empty()) w.set("tokenizer.ggml.tokens", GgufValue::make_str_array(m.tokens));
  if (!m.types.empty()) w.set("tokenizer.ggml.token_type", GgufValue::make_i32_array(m.types));
  if (!m.merges.empty()) w.set("tokenizer.ggml.merges", GgufValue::make_str_array(m.merges));
  if (!m.scores.empty()) w.set("tokenizer.ggml.scores", GgufValue::make_f32_array(m.scores));
  if (edit) edit(w);
  static std::vector<std::vector<uint8_t>> keep;  // GgufFile::parse needs the bytes to outlive it
  keep.push_back(w.write_to_memory());
  auto f = GgufFile::parse(keep.back().data(), keep.back().size(), "mini.gguf");
  if (!f.ok()) return f.status();
  return Tokenizer::from_gguf(*f);
}

void expect_error(const Result<std::unique_ptr<Tokenizer>>& r, const std::string& key) {
  ASSERT_FALSE(r.ok()) << "expected an error naming " << key;
  EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
}

TEST(VocabErrorsTest, EachNamesTheKey) {
  ASSERT_TRUE(build(MiniVocab{}).ok());
  MiniVocab m;
  m.model = "";
  expect_error(build(m), "tokenizer.ggml.model");
  m = MiniVocab{};
  m.model = "t5";
  expect_error(build(m), "tokenizer.ggml.model");
  m = MiniVocab{};
  m.tokens.clear();
  expect_error(build(m), "tokenizer.ggml.tokens");
  m = MiniVocab{};
  m.types = {1, 1};
  expect_error(build(m), "tokenizer.ggml.token_type");
  m = MiniVocab{};
  m.scores = {0.f};
  expect_error(build(m), "tokenizer.ggml.scores");
  m = MiniVocab{};
  m.merges.clear();
  expect_error(build(m), "tokenizer.ggml.merges");
  m = MiniVocab{};
  m.merges = {"a b", "ab"};
  expect_error(build(m), "tokenizer.ggml.merges[1]");
  expect_error(build(MiniVocab{}, [](GgufWriter& w) { w.set_str("tokenizer.ggml.pre", "klingon"); }),
               "tokenizer.ggml.pre");
  expect_error(build(MiniVocab{}, [](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 4); }),
               "tokenizer.ggml.bos_token_id");
  expect_error(build(MiniVocab{}, [](GgufWriter& w) { w.set_bool("tokenizer.ggml.add_bos_token", true); }),
               "tokenizer.ggml.add_bos_token");
  expect_error(build(MiniVocab{}, [](GgufWriter& w) { w.set_str("tokenizer.ggml.tokens", "abc"); }),
               "tokenizer.ggml.tokens");
}

TEST(VocabErrorsTest, NoSuchTokenIsAbsent) {
  auto r = build(MiniVocab{}, [](GgufWriter& w) {
    w.set_u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
    w.set_u32("tokenizer.ggml.eos_token_id", 3);
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->bos_id(), -1);
  EXPECT_EQ((*r)->eos_id(), 3);
  EXPECT_FALSE((*r)->add_bos());  // BPE vocabularies add BOS only when they say so
  EXPECT_EQ((*r)->encode("ab"), (std::vector<int32_t>{2}));
  EXPECT_EQ((*r)->encode("aab", false), (std::vector<int32_t>{0, 2}));
}

}  // namespace
}  // namespace hz
