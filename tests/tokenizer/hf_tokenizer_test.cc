// Tokenizer::from_hf: tokenizer.json files (SentencePiece-style with byte fallback, byte-level
// GPT-2 / Llama 3) encode llama.cpp's tokenizer vectors exactly; malformed files are refused with
// errors naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "format/gguf.h"
#include "format/hf_tokenizer_json.h"
#include "support/hf_folder_writer.h"
#include "support/test_support.h"
#include "support/vocab_vectors.h"
#include "tokenizer/tokenizer.h"

namespace hz {
namespace {

using json = nlohmann::json;

struct Files {
  json tokenizer, config;
};

// tokenizer.json / tokenizer_config.json of a shared GGUF vocabulary, through text (as on disk).
Files files_for(const std::string& family) {
  auto f = GgufFile::open(test::testdata_path("vocab/ggml-vocab-" + family + ".gguf"));
  EXPECT_TRUE(f.ok()) << f.status().message();
  auto tok = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return {json::parse(test::tokenizer_json_from_gguf(*f, **tok).dump()),
          json::parse(test::tokenizer_config_json_from_gguf(*f, **tok).dump())};
}

class HfVocabVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfVocabVectorsTest, MatchesEveryCaseExactly) {
  const std::string base = test::testdata_path("vocab/ggml-vocab-" + GetParam() + ".gguf");
  Files files = files_for(GetParam());
  auto tok = Tokenizer::from_hf(files.tokenizer, files.config);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  std::vector<std::string> texts = test::read_vocab_texts(base + ".inp");
  std::vector<std::vector<int32_t>> expected = test::read_vocab_ids(base + ".out");
  ASSERT_EQ(expected.size(), texts.size());
  ASSERT_GT(texts.size(), 40u);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ((*tok)->encode(texts[i], false, false), expected[i]) << "case " << i << ": '" << texts[i] << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, HfVocabVectorsTest, ::testing::Values("llama-spm", "gpt-2", "llama-bpe"), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n) c = c == '-' ? '_' : c;
  return n;
});

TEST(HfTokenizerTest, FamiliesAndSpecials) {
  Files spm = files_for("llama-spm");
  auto metadata = [](const Files& f, const json* gen = nullptr) {
    HfTokenizerFiles in{&f.tokenizer, &f.config, gen, "t.json", 0};
    return hf_tokenizer_to_gguf(in);
  };
  auto kv = metadata(spm);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  auto find = [&](const GgufMetadata& m, const std::string& key) -> const GgufValue* {
    for (const auto& [k, v] : m)
      if (k == key) return &v;
    return nullptr;
  };
  EXPECT_EQ(find(*kv, "tokenizer.ggml.model")->str, "llama");
  EXPECT_TRUE(find(*kv, "tokenizer.ggml.add_space_prefix")->b);
  EXPECT_EQ(find(*kv, "tokenizer.ggml.bos_token_id")->u, 1u);

  Files l3 = files_for("llama-bpe");
  kv = metadata(l3);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  EXPECT_EQ(find(*kv, "tokenizer.ggml.model")->str, "gpt2");
  EXPECT_EQ(find(*kv, "tokenizer.ggml.pre")->str, "llama-bpe");

  // generation_config.json's EOS list: every id ends generation.
  json gen = {{"eos_token_id", json::array({128001, 128008, 128009})}};
  kv = metadata(l3, &gen);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  EXPECT_EQ(find(*kv, "tokenizer.ggml.eot_token_id")->u, 128008u);
  auto tok = Tokenizer::from_hf(l3.tokenizer, l3.config);
  ASSERT_TRUE(tok.ok());
  EXPECT_TRUE((*tok)->is_eog(128009));  // <|eot_id|> by text as well

  // Padding to config.json's vocab_size adds unused placeholders.
  HfTokenizerFiles padded{&spm.tokenizer, &spm.config, nullptr, "t.json", 32016};
  kv = hf_tokenizer_to_gguf(padded);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(find(*kv, "tokenizer.ggml.tokens")->arr->strings.size(), 32016u);
  EXPECT_EQ(find(*kv, "tokenizer.ggml.tokens")->arr->strings.back(), "[PAD32015]");

  // Named chat templates: the default one is used.
  json cfg = spm.config;
  cfg["chat_template"] = json::array({{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}});
  HfTokenizerFiles named{&spm.tokenizer, &cfg, nullptr, "t.json", 0};
  kv = hf_tokenizer_to_gguf(named);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(find(*kv, "tokenizer.chat_template")->str, "D");

  // Metaspace pre-tokenizer instead of the Prepend/Replace normalizer (Mistral-style files).
  json ms = spm.tokenizer;
  ms["normalizer"] = nullptr;
  ms["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", false}};
  auto mtok = Tokenizer::from_hf(ms, spm.config);
  ASSERT_TRUE(mtok.ok()) << mtok.status().message();
  auto ref = Tokenizer::from_hf(spm.tokenizer, spm.config);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ((*mtok)->encode("Hello world  again"), (*ref)->encode("Hello world  again"));
}

void expect_error(const json& tokenizer, const json& config, const std::string& fragment) {
  HfTokenizerFiles in{&tokenizer, &config, nullptr, "bad/tokenizer.json", 0};
  auto kv = hf_tokenizer_to_gguf(in);
  ASSERT_FALSE(kv.ok()) << "accepted; expected: " << fragment;
  EXPECT_NE(kv.status().message().find(fragment), std::string::npos) << kv.status().message();
}

TEST(HfTokenizerTest, MalformedFilesRefused) {
  Files spm = files_for("llama-spm");
  Files gpt2 = files_for("gpt-2");
  json t = spm.tokenizer;
  t["model"]["type"] = "Unigram";
  expect_error(t, spm.config, "model.type 'Unigram' is not supported");
  t = spm.tokenizer;
  t["model"].erase("vocab");
  expect_error(t, spm.config, "model.vocab is missing");
  t = gpt2.tokenizer;
  t["model"]["merges"][3] = "nospace";
  expect_error(t, gpt2.config, "model.merges[3]");
  t = gpt2.tokenizer;
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}}, {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  expect_error(t, gpt2.config, "not one of the known byte-level families");
  t = spm.tokenizer;
  t["added_tokens"] = json::array({{{"id", 5}, {"content", "<new>"}, {"special", true}}});
  expect_error(t, spm.config, "id 5 is given to both");
  t = spm.tokenizer;
  t["model"]["vocab"]["x"] = -4;
  expect_error(t, spm.config, "model.vocab['x'] id -4 is out of range");
  json c = spm.config;
  c["bos_token"] = "<nope>";
  expect_error(spm.tokenizer, c, "bos_token '<nope>' is not in the vocabulary");
  t = spm.tokenizer;
  t["normalizer"] = nullptr;
  t["model"]["byte_fallback"] = false;
  expect_error(t, spm.config, "neither byte-level");
  expect_error(json::array(), spm.config, "not a JSON object");
}

}  // namespace
}  // namespace hz
