// The RoPE scaling flags of `horizon run` (shared by serve): accepted values change nothing for a
// model trained at its context, bad values give one clear error naming the flag.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_support.h"

namespace hz {
namespace {

std::string bin() { return HORIZON_BINARY; }
std::string model() { return test::model_path("stories260K.gguf"); }

TEST(RopeFlagsTest, ExplicitNoneAndTrainedBaseKeepTheStory) {
  std::string out, err;
  int rc = test::run_command(bin() + " run -m " + model() +
                                 " -p 'Once upon a time' -n 16 --temp 0 --rope-scaling none --rope-freq-base 10000",
                             &out, &err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(out.rfind(", there was a little girl named Lily", 0), 0u) << out;
}

TEST(RopeFlagsTest, LinearScalingChangesTheOutput) {
  std::string out, err;
  int rc = test::run_command(bin() + " run -m " + model() +
                                 " -p 'Once upon a time' -n 16 --temp 0 --rope-scaling linear --rope-freq-scale 0.25",
                             &out, &err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.rfind(", there was a little girl named Lily", 0), 0u) << out;
}

TEST(RopeFlagsTest, BadValuesNameTheFlag) {
  struct Case {
    std::string args;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"--rope-scaling longrope", "--rope-scaling"},
      {"--rope-freq-base 0.5", "--rope-freq-base"},
      {"--rope-freq-scale -2", "--rope-freq-scale"},
      {"--yarn-orig-ctx -5", "--yarn-orig-ctx"},
      {"--rope-scaling llama3", "--rope-freq-scale"},  // llama3 needs a factor
  };
  for (const auto& c : cases) {
    std::string out, err;
    int rc = test::run_command(bin() + " run -m " + model() + " -p hi -n 2 " + c.args, &out, &err);
    EXPECT_NE(rc, 0) << c.args;
    EXPECT_LT(rc, 128) << c.args << ": crashed";
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.args << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << c.args << ": " << err;
  }
}

}  // namespace
}  // namespace hz
