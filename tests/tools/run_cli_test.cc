// `horizon run` as a user types it: output on stdout, one clear error line and a non-zero exit
// code for every bad input.
#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }
std::string model() { return test::model_path("stories260K.gguf"); }

TEST(RunCliTest, GreedyStoryOnStdoutTimingOnStderr) {
  std::string out, err;
  int rc = test::run_command(bin() + " run -m " + model() + " -p 'Once upon a time' -n 16 --temp 0", &out, &err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(out.rfind(", there was a little girl named Lily", 0), 0u) << out;
  EXPECT_NE(err.find("tokens/s"), std::string::npos);
}

TEST(RunCliTest, SameSeedSameOutput) {
  std::string a, b, err;
  std::string cmd = bin() + " run -m " + model() + " -p 'The dog' -n 24 --temp 1 --seed 7";
  ASSERT_EQ(test::run_command(cmd, &a, &err), 0) << err;
  ASSERT_EQ(test::run_command(cmd, &b, &err), 0) << err;
  EXPECT_EQ(a, b);
}

struct BadCase {
  const char* name;
  std::string args;
  const char* expect;  // substring of the error line
};

TEST(RunCliTest, BadInputsGiveOneClearError) {
  std::string dir = test::make_temp_dir("runcli");
  { std::ofstream(dir + "/junk.gguf") << "this is not a model"; }
  { std::ofstream(dir + "/empty.txt"); }
  std::string long_prompt(3000, 'a');
  for (size_t i = 0; i < long_prompt.size(); i += 2) long_prompt[i] = ' ';
  std::vector<BadCase> cases = {
      {"missing model", "run -m /nonexistent.gguf -p hi", "no such file"},
      {"corrupt model", "run -m " + dir + "/junk.gguf -p hi", "not a GGUF file"},
      {"vocab-only file", "run -m " + test::testdata_path("vocab/ggml-vocab-llama-spm.gguf") + " -p hi", "token_embd.weight"},
      {"empty prompt", "run -m " + model() + " -p ''", "prompt is empty"},
      {"empty prompt file", "run -m " + model() + " -f " + dir + "/empty.txt", "empty"},
      {"prompt longer than context", "run -m " + model() + " -p '" + long_prompt + "'", "max-model-len"},
      {"bad -n", "run -m " + model() + " -p hi -n 0", "-n"},
      {"bad temperature", "run -m " + model() + " -p hi --temp -1", "--temp"},
      {"bad kv dtype", "run -m " + model() + " -p hi --kv-cache-dtype f13", "--kv-cache-dtype"},
      {"bad block size", "run -m " + model() + " -p hi --block-size 17", "--block-size"},
      {"bad kv budget", "run -m " + model() + " -p hi --kv-budget lots", "--kv-budget"},
      {"tiny kv budget", "run -m " + model() + " -p hi --kv-budget 10", "KV"},
      {"non-numeric flag", "run -m " + model() + " -p hi -n many", "-n"},
  };
  for (const auto& c : cases) {
    std::string out, err;
    int rc = test::run_command(bin() + " " + c.args, &out, &err);
    EXPECT_NE(rc, 0) << c.name;
    EXPECT_LT(rc, 128) << c.name << ": crashed";
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << c.name << ": " << err;
  }
}

}  // namespace
}  // namespace hz
