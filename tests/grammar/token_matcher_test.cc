#include "grammar/token_matcher.h"

#include <gtest/gtest.h>

#include <random>

#include "format/gguf.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace hz::grammar {
namespace {

bool bit(const std::vector<uint64_t>& bits, int32_t id) { return (bits[id >> 6] >> (id & 63)) & 1; }

std::shared_ptr<const TokenGrammar> compile(const std::string& text, std::shared_ptr<const TokenVocab> vocab) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::make_shared<const TokenGrammar>(std::move(g).value(), std::move(vocab));
}

// The mask must equal the brute-force answer: a token is allowed when its bytes keep the grammar
// alive; end-of-generation tokens exactly where the grammar can end. Follows random allowed tokens.
void check_against_brute_force(const std::shared_ptr<const TokenGrammar>& g, int steps, uint32_t seed) {
  GrammarMatcher m(g);
  const TokenVocab& v = g->vocab();
  std::vector<uint64_t> bits(g->mask_words());
  std::mt19937 rng(seed);
  std::string hist;
  for (int step = 0; step < steps; ++step) {
    m.fill_mask(bits.data());
    std::string dbg;
    for (int32_t id = 0; id < v.size(); ++id) if (bit(bits, id)) dbg += "[" + v.piece(id) + "]";
    dbg += " hist " + hist + "\n";
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < v.size(); ++id) {
      if (!v.piece(id).empty() && m.accepts_bytes(v.piece(id))) allowed.push_back(id);
    }
    // A dead end (no token continues the text) allows end-of-generation so that the request ends.
    const bool eos_wanted = m.can_end() || allowed.empty();
    for (int32_t id = 0; id < v.size(); ++id) {
      const bool is_eog = std::find(v.eog_ids().begin(), v.eog_ids().end(), id) != v.eog_ids().end();
      const bool want = is_eog ? eos_wanted : std::binary_search(allowed.begin(), allowed.end(), id);
      ASSERT_EQ(bit(bits, id), want) << dbg << "step " << step << " token " << id << " '" << v.piece(id) << "'";
    }
    if (allowed.empty()) return;
    int32_t pick = allowed[rng() % allowed.size()];
    hist += v.piece(pick) + "|";
    ASSERT_TRUE(m.accept(pick));
  }
}

std::shared_ptr<const TokenVocab> small_vocab() {
  std::vector<std::string> pieces = {"a", "b", "ab", "ba", "{", "}", "\"", "\":", "\"}", "{\"", "\xE2", "\x98", "\x83",
                                     "\xE2\x98", "\xE2\x98\x83", "x\"", "\"a", "\\", "\\\"", " ", ",", ", \"", "1", "12",
                                     "", "<ctl>"};
  std::vector<int32_t> eog = {static_cast<int32_t>(pieces.size())};
  pieces.push_back("");  // the EOS token: no bytes
  return std::make_shared<const TokenVocab>(std::move(pieces), std::move(eog));
}

const char* kObjectGrammar = R"g(
root ::= "{" (pair ("," " "? pair)*)? "}"
pair ::= string ":" value
value ::= string | [0-9]+
string ::= "\"" ([^"\\] | "\\" ["\\])* "\""
)g";

TEST(TokenMatcherTest, MaskMatchesBruteForceOnSmallVocab) {
  auto g = compile(kObjectGrammar, small_vocab());
  for (uint32_t seed = 0; seed < 20; ++seed) check_against_brute_force(g, 30, seed);
}

TEST(TokenMatcherTest, TokensEndingInsideACharacterAreAllowed) {
  auto g = compile(R"g(root ::= "☃"+)g", small_vocab());
  GrammarMatcher m(g);
  std::vector<uint64_t> bits(g->mask_words());
  m.fill_mask(bits.data());
  EXPECT_TRUE(bit(bits, 10));   // \xE2
  EXPECT_TRUE(bit(bits, 13));   // \xE2\x98
  EXPECT_TRUE(bit(bits, 14));   // the whole snowman
  EXPECT_FALSE(bit(bits, 11));  // a continuation byte cannot start
  ASSERT_TRUE(m.accept(10));
  m.fill_mask(bits.data());
  EXPECT_TRUE(bit(bits, 11));
  EXPECT_FALSE(bit(bits, 12));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept(11));
  ASSERT_TRUE(m.accept(12));
  EXPECT_TRUE(m.can_end());
}

TEST(TokenMatcherTest, EndOfGenerationOnlyWhereTheGrammarCanEnd) {
  auto v = small_vocab();
  const int32_t eos = v->eog_ids()[0];
  auto g = compile(R"g(root ::= "ab" "a"?)g", v);
  GrammarMatcher m(g);
  std::vector<uint64_t> bits(g->mask_words());
  m.fill_mask(bits.data());
  EXPECT_FALSE(bit(bits, eos));
  ASSERT_TRUE(m.accept(2));  // "ab"
  m.fill_mask(bits.data());
  EXPECT_TRUE(bit(bits, eos));
  EXPECT_TRUE(bit(bits, 0));
  ASSERT_TRUE(m.accept(0));
  m.fill_mask(bits.data());
  // Complete and nothing can follow: only EOS.
  for (int32_t id = 0; id < v->size(); ++id) EXPECT_EQ(bit(bits, id), id == eos) << id;
}

TEST(TokenMatcherTest, TokensWithoutBytesAreNeverAllowed) {
  auto v = small_vocab();
  auto g = compile(R"g(root ::= .*)g", v);
  GrammarMatcher m(g);
  std::vector<uint64_t> bits(g->mask_words());
  m.fill_mask(bits.data());
  EXPECT_FALSE(bit(bits, 24));  // ""
  EXPECT_TRUE(bit(bits, 0));
}

TEST(TokenMatcherTest, RejectedTokenFailsTheMatcherAndLeavesOnlyEos) {
  auto v = small_vocab();
  auto g = compile(R"g(root ::= "a")g", v);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept(1));
  EXPECT_TRUE(m.failed());
  std::vector<uint64_t> bits(g->mask_words());
  m.fill_mask(bits.data());
  for (int32_t id = 0; id < v->size(); ++id) EXPECT_EQ(bit(bits, id), id == v->eog_ids()[0]);
}

std::shared_ptr<const TokenVocab> shared_vocab(const std::string& family, std::unique_ptr<Tokenizer>* keep) {
  auto f = GgufFile::open(test::testdata_path("vocab/ggml-vocab-" + family + ".gguf"));
  EXPECT_TRUE(f.ok()) << f.status().message();
  auto tok = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  *keep = std::move(tok).value();
  return TokenVocab::from_tokenizer(**keep);
}

TEST(TokenMatcherTest, SentencePieceSpaceAndSpecialTokens) {
  std::unique_ptr<Tokenizer> tok;
  auto v = shared_vocab("llama-spm", &tok);
  const int32_t space_brace = tok->vocab().find("\xE2\x96\x81{");
  ASSERT_GE(space_brace, 0);
  EXPECT_EQ(v->piece(space_brace), " {");
  EXPECT_EQ(v->piece(tok->bos_id()), "");  // control
  const int32_t byte_e2 = tok->vocab().find("<0xE2>");
  ASSERT_GE(byte_e2, 0);
  EXPECT_EQ(v->piece(byte_e2), "\xE2");
  auto g = compile(R"g(root ::= " "? "{" [a-z]* "}")g", v);
  GrammarMatcher m(g);
  std::vector<uint64_t> bits(g->mask_words());
  m.fill_mask(bits.data());
  EXPECT_TRUE(bit(bits, space_brace));
  EXPECT_FALSE(bit(bits, tok->bos_id()));
  EXPECT_FALSE(bit(bits, tok->eos_id()));
}

TEST(TokenMatcherTest, MaskMatchesBruteForceOnRealVocabularies) {
  for (const char* family : {"llama-spm", "llama-bpe"}) {
    std::unique_ptr<Tokenizer> tok;
    auto g = compile(kObjectGrammar, shared_vocab(family, &tok));
    check_against_brute_force(g, 5, 7);
  }
}

}  // namespace
}  // namespace hz::grammar
