// llama.cpp's tokenizer vectors (shared/testdata/vocab): every text of every vocabulary, exact ids.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "support/test_support.h"
#include "support/vocab_vectors.h"
#include "tokenizer/tokenizer.h"

namespace hz {
namespace {


std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

class VocabVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectorsTest, MatchesEveryCaseExactly) {
  const std::string base = test::testdata_path("vocab/ggml-vocab-" + GetParam() + ".gguf");
  auto f = GgufFile::open(base);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  std::vector<std::string> texts = test::read_vocab_texts(base + ".inp");
  std::vector<std::vector<int32_t>> expected = test::read_vocab_ids(base + ".out");
  ASSERT_EQ(texts.size(), 46u);
  ASSERT_EQ(expected.size(), texts.size());
  int failures = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> got = (*tok)->encode(texts[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(show(got), show(expected[i])) << "case " << i << ": '" << texts[i] << "'";
    failures += got != expected[i];
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabVectorsTest, ::testing::Values("llama-spm", "gpt-2", "deepseek-coder", "falcon", "mpt", "llama-bpe"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

// The golden prompts of stories260K.gguf (SentencePiece vocabulary, BOS added by default).
TEST(TokenizerStoriesTest, EncodesGoldenPrompts) {
  auto f = GgufFile::open(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_EQ((*tok)->encode("Once upon a time"), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ((*tok)->encode("The little dog"), (std::vector<int32_t>{1, 291, 376, 400, 428}));
  EXPECT_EQ((*tok)->encode("Lily and Ben went to the park. They saw"),
            (std::vector<int32_t>{1, 317, 269, 368, 302, 263, 377, 267, 265, 282, 295, 433, 426, 342, 394}));
  std::vector<int32_t> out = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267};
  EXPECT_EQ((*tok)->decode(out), ", there was a little girl named Lily. She loved to");
}

}  // namespace
}  // namespace hz
