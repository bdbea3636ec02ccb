// `horizon tokenize`: output formats, -f byte-exactness, --no-special, errors. Runs the built binary.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/test_support.h"

namespace hz {
namespace {

std::string vocab(const std::string& family) { return test::testdata_path("vocab/ggml-vocab-" + family + ".gguf"); }

int run(const std::string& args, std::string* out, std::string* err = nullptr) {
  return test::run_command(std::string(HORIZON_BINARY) + " tokenize " + args, out, err);
}

TEST(TokenizeCliTest, PrintsIdTabJsonEscapedPiece) {
  std::string out;
  ASSERT_EQ(run("-m " + vocab("llama-spm") + " -p 'Hello \"w\"'", &out), 0);
  // BOS is added and shown as its text; SentencePiece spaces appear as spaces.
  EXPECT_EQ(out, "1\t<s>\n15043\t Hello\n376\t \\\"\n29893\tw\n29908\t\\\"\n");
}

TEST(TokenizeCliTest, IdsOnOneLine) {
  std::string out;
  ASSERT_EQ(run("-m " + vocab("gpt-2") + " -p 'Hello world' --ids", &out), 0);
  EXPECT_EQ(out, "15496 995\n");
  ASSERT_EQ(run("-m " + vocab("llama-bpe") + " -p 'Hello world' --ids", &out), 0);
  EXPECT_EQ(out, "128000 9906 1917\n");
  ASSERT_EQ(run("-m " + vocab("llama-bpe") + " -p 'Hello world' --ids --no-special", &out), 0);
  EXPECT_EQ(out, "9906 1917\n");
}

TEST(TokenizeCliTest, NoSpecialLeavesControlTokensAsText) {
  std::string out;
  ASSERT_EQ(run("-m " + vocab("llama-bpe") + " -p '<|eot_id|>' --ids", &out), 0);
  EXPECT_EQ(out, "128000 128009\n");
  ASSERT_EQ(run("-m " + vocab("llama-bpe") + " -p '<|eot_id|>' --ids --no-special", &out), 0);
  EXPECT_NE(out.find(' '), std::string::npos);  // several ordinary tokens
  EXPECT_EQ(out.find("128009"), std::string::npos);
}

TEST(TokenizeCliTest, FileIsReadByteExactAndMatchesTheVectors) {
  // Every MPT vector (runs of spaces there are user-defined tokens), through a file each.
  std::string dir = test::make_temp_dir("tokcli");
  std::string path = dir + "/in.txt";
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string inp = slurp(vocab("mpt") + ".inp"), sep = "\n__ggml_vocab_test__\n";
  std::istringstream expected_lines(slurp(vocab("mpt") + ".out"));
  std::string out;
  size_t pos = 0, cases = 0;
  for (size_t hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size(), ++cases) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << inp.substr(pos, hit - pos);
    std::string expected;
    std::getline(expected_lines, expected);
    if (!expected.empty() && expected[0] == ' ') expected.erase(0, 1);
    ASSERT_EQ(run("-m " + vocab("mpt") + " -f " + path + " --ids --no-special", &out), 0);
    EXPECT_EQ(out, expected + "\n") << "case " << cases;
  }
  EXPECT_EQ(cases, 46u);
  // Escapes: newline, tab, and a byte token that is not UTF-8 on its own.
  std::ofstream(path, std::ios::binary) << "\t\n\xF0\x9F\xA6\x99";
  ASSERT_EQ(run("-m " + vocab("llama-spm") + " -f " + path + " --no-special", &out), 0);
  EXPECT_EQ(out, "29871\t \n12\t\\t\n13\t\\n\n243\t\\u00f0\n162\t\\u009f\n169\t\\u00a6\n156\t\\u0099\n");
  test::run_command("rm -rf " + dir);
}

TEST(TokenizeCliTest, EmptyTextGivesJustBos) {
  std::string out;
  ASSERT_EQ(run("-m " + vocab("llama-spm") + " -p '' --ids", &out), 0);
  EXPECT_EQ(out, "1\n");
  ASSERT_EQ(run("-m " + vocab("llama-spm") + " -p '' --ids --no-special", &out), 0);
  EXPECT_EQ(out, "\n");
}

TEST(TokenizeCliTest, ErrorsAreOneLineAndNonZero) {
  std::string out, err;
  EXPECT_NE(run("-m /nonexistent.gguf -p x", &out, &err), 0);
  EXPECT_NE(err.find("error:"), std::string::npos);
  EXPECT_NE(run("-m " + vocab("gpt-2"), &out, &err), 0);  // no text
  EXPECT_NE(err.find("-p"), std::string::npos);
  EXPECT_NE(run("-m " + vocab("gpt-2") + " -f /nonexistent.txt", &out, &err), 0);
  EXPECT_NE(err.find("/nonexistent.txt"), std::string::npos);
  EXPECT_NE(run("-m " + test::model_path("stories260K.gguf") + " -p x -f y", &out, &err), 0);
}

}  // namespace
}  // namespace hz
