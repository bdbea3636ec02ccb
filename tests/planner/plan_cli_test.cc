// `horizon plan` end to end: JSON keys and figures, text output, errors on bad flags.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace hz {
namespace {

std::string fixture(const std::string& name) { return std::string(HORIZON_SOURCE_DIR) + "/tests/fixtures/configs/" + name; }

TEST(PlanCliTest, JsonHasStableKeys) {
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + fixture("llama-3-8b.json") +
                                 " --memory 24GiB --max-num-seqs 16 --threads 8 --json",
                             &out, &err);
  ASSERT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["params_total"], 8030261248u);
  EXPECT_EQ(j["params_active"], 8030261248u);
  EXPECT_EQ(j["weights_bytes"], 16061054976u);
  EXPECT_EQ(j["kv_bytes_per_token"]["f16"], 131072);
  EXPECT_EQ(j["memory_bytes"], 24ull << 30);
  for (const char* kv : {"f32", "f16", "bf16", "fp8", "int8", "int4"}) {
    ASSERT_TRUE(j["max_context"].contains(kv)) << kv;
    for (const char* c : {"1", "4", "8", "16"}) EXPECT_TRUE(j["max_context"][kv][c].is_number_unsigned());
  }
  EXPECT_EQ(j["max_context"]["f16"]["16"], 4528);
  EXPECT_FALSE(j["fits"]);
  ASSERT_EQ(j["remedies"].size(), 6u);
  EXPECT_EQ(j["remedies"][0]["kind"], "shorter_context");
  EXPECT_EQ(j["remedies"][5]["kind"], "smaller_weights");
}

TEST(PlanCliTest, TextAndModelFlag) {
  std::string out, err;
  int rc = test::run_command(std::string(HORIZON_BINARY) + " plan -m " + test::model_path("stories260K.gguf") + " --memory 1GiB", &out, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("largest context per sequence"), std::string::npos) << out;
  EXPECT_NE(out.find(": fits"), std::string::npos) << out;
}

TEST(PlanCliTest, BadFlagsFailWithOneLine) {
  for (const char* args : {" --memory 24XB", " --kv-cache-dtype q9", " --weight-type q2_K", " --kv-cold-dtype int4",
                           " --max-num-seqs 0"}) {
    std::string out, err;
    int rc = test::run_command(std::string(HORIZON_BINARY) + " plan " + fixture("qwen2-7b.json") + args, &out, &err);
    EXPECT_NE(rc, 0) << args;
    EXPECT_NE(err.find("error: --"), std::string::npos) << args << ": " << err;
  }
  std::string err;
  EXPECT_NE(test::run_command(std::string(HORIZON_BINARY) + " plan /nonexistent/model.gguf", nullptr, &err), 0);
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
}

}  // namespace
}  // namespace hz
