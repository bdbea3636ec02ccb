// horizon perplexity end to end: a base run saves its distributions, an int8-KV run reports its KL
// divergence against them; bad flags and files give one-line errors naming the flag.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }
std::string model() { return test::model_path("stories260K.gguf"); }
std::string corpus() { return test::testdata_path("corpus/stories260K-samples.txt"); }

TEST(PerplexityCliTest, BaseThenKlDivergence) {
  std::string dir = test::make_temp_dir("hz_ppl");
  std::string base = dir + "/base.bin";
  std::string out, err;
  ASSERT_EQ(0, test::run_command(bin() + " perplexity -m " + model() + " -f " + corpus() +
                                     " --ctx 256 --kv-cache-dtype f32 --kl-divergence-base " + base,
                                 &out, &err))
      << err;
  EXPECT_NE(out.find("perplexity: 3.59"), std::string::npos) << out;
  EXPECT_NE(out.find("saved the base"), std::string::npos) << out;
  ASSERT_EQ(0, test::run_command(bin() + " perplexity -m " + model() + " --kv-cache-dtype q8_0 --kl-divergence-base " +
                                     base + " --kl-divergence",
                                 &out, &err))
      << err;
  EXPECT_NE(out.find("KV int8"), std::string::npos) << out;
  EXPECT_NE(out.find("KL divergence vs base: mean 0.000"), std::string::npos) << out;
  EXPECT_NE(out.find("top token changed"), std::string::npos) << out;
}

TEST(PerplexityCliTest, KvSweepPrintsOneRowPerChoiceAgainstExactKv) {
  std::string out, err;
  ASSERT_EQ(0, test::run_command(bin() + " perplexity -m " + model() + " -f " + corpus() +
                                     " --ctx 128 -t 2 --kv-sweep --kv-sweep-windows 32",
                                 &out, &err))
      << err;
  for (const char* col : {"bits/val", "cold B/tok", "mean KLD", "p99 KLD", "top-1 %", "dppl %"})
    EXPECT_NE(out.find(col), std::string::npos) << col << "\n" << out;
  // One row per choice, with and without rotation, and the window asked for.
  for (const char* row : {"\nf16 ", "\nfp8 ", "\nint8 rotated ", "\nint4 ", "\nint4 rotated ", "\nf16 (hot 32) + int4 rotated ",
                          "\nf16 (hot 32) + int3 ", "\nf16 (hot 32) + int2 ", "\nf16 (hot 32, sinks 4) + int2 "})
    EXPECT_NE(out.find(row), std::string::npos) << row << "\n" << out;
  EXPECT_EQ(out.find("(hot 16)"), std::string::npos) << out;
  EXPECT_EQ(out.find("+ int2 rotated"), std::string::npos) << out;  // only with --kv-sweep-all
  // int4 at 6 bits per value (4 + one f16 scale per 8 values at head dim 8), int8 at 10; int2 at 3
  // (2 + a scale and an offset byte per channel over a 16-token block).
  EXPECT_NE(out.find("\nint4" + std::string(46, ' ') + "6.00"), std::string::npos) << out;
  EXPECT_NE(out.find("\nint8" + std::string(45, ' ') + "10.00"), std::string::npos) << out;
  EXPECT_NE(out.find("\nf16 (hot 32) + int2" + std::string(31, ' ') + "3.00"), std::string::npos) << out;
  // Keys and values apart: the bits are the mean of the two streams' (K int3 4, V int2 3).
  EXPECT_NE(out.find("\nK int8c / V int4c" + std::string(33, ' ') + "7.00"), std::string::npos) << out;
  EXPECT_NE(out.find("\nf16 (hot 32, sinks 4) + K int3 / V int2" + std::string(11, ' ') + "3.50"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\nf16 (hot 32, sinks 4) + K int2 / V int3" + std::string(11, ' ') + "3.50"), std::string::npos)
      << out;
}

// --kv-sweep-types keeps the rows that store the listed types (cold type under a window).
TEST(PerplexityCliTest, KvSweepTypesKeepsTheRowsOfTheListedTypes) {
  std::string out, err;
  ASSERT_EQ(0, test::run_command(bin() + " perplexity -m " + model() + " -f " + corpus() +
                                     " --ctx 128 -t 2 --kv-sweep --kv-sweep-windows 32 --kv-sweep-types int8c,q4_0",
                                 &out, &err))
      << err;
  for (const char* row : {"\nint8c ", "\nint8c rotated ", "\nint4 ", "\nint4 rotated ", "\nf16 (hot 32) + int4 "})
    EXPECT_NE(out.find(row), std::string::npos) << row << "\n" << out;
  for (const char* row : {"\nf16  ", "\nint8 ", "\nint4c ", "\nfp8 ", "+ int2", "+ int4c", "+ int8 "})
    EXPECT_EQ(out.find(row), std::string::npos) << row << "\n" << out;
}

TEST(PerplexityCliTest, ErrorsNameTheFlag) {
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"-f " + corpus() + " --kv-cache-dtype f13", "--kv-cache-dtype"},
      {"-f " + corpus() + " --kv-hot-window 64 --kv-cold-dtype int5", "--kv-cold-dtype"},
      {"-f " + corpus() + " --kv-cache-dtype int2", "--kv-cache-dtype int2"},
      {"-f " + corpus() + " --kv-sink-tokens 4", "--kv-sink-tokens"},
      {"-f " + corpus() + " --kv-sweep --kv-sweep-sinks -1", "--kv-sweep-sinks"},
      {"--kl-divergence", "--kl-divergence-base"},
      {"--kl-divergence --kl-divergence-base " + corpus(), "bad magic"},
      {"", "-f FILE"},
      {"-f " + corpus() + " --ctx 2", "--ctx"},
      {"-f " + corpus() + " --kv-rotation maybe", "--kv-rotation"},
      {"-f " + corpus() + " --kv-sweep --kv-sweep-windows 16,x", "--kv-sweep-windows"},
      {"-f " + corpus() + " --kv-sweep --kv-sweep-types int8c,int9", "--kv-sweep-types 'int9'"},
      {"-f " + corpus() + " --kv-sweep --kv-sweep-types bf16", "no row of the sweep"},
      {"--kv-sweep --kl-divergence-base " + corpus(), "--kv-sweep"},
  };
  for (const Case& c : cases) {
    std::string out, err;
    int rc = test::run_command(bin() + " perplexity -m " + model() + " " + c.args, &out, &err);
    EXPECT_NE(rc, 0) << c.args;
    EXPECT_NE(err.find(c.needle), std::string::npos) << c.args << ": " << err;
  }
}

}  // namespace
}  // namespace hz
