// Structured outputs through the official openai npm client against `horizon serve` on
// stories260K: json_schema answers stop by themselves and validate (ajv), streamed equals not
// streamed, max_tokens inside the grammar gives finish_reason length, json_object answers that
// finish are JSON objects, logit_bias +100 decides greedy output, /tokenize round-trips.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

TEST(StructuredOutputE2ETest, OpenAIClientSchemasLogitBiasAndTokenize) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  std::string out, err;
  const std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/openai_structured.mjs";
  ASSERT_EQ(test::run_command("node " + script + " " + srv.base_url(), &out, &err), 0) << err;
  const nlohmann::json r = nlohmann::json::parse(out);

  ASSERT_EQ(r["json_schema"].size(), 20u);
  for (const auto& a : r["json_schema"]) {
    EXPECT_EQ(a["finish"], "stop") << a["text"];
    EXPECT_TRUE(a["valid"].get<bool>()) << a["text"];
  }
  EXPECT_EQ(r["json_schema_stream"]["text"], r["json_schema"][0]["text"]);
  EXPECT_EQ(r["json_schema_stream"]["finish"], "stop");
  EXPECT_EQ(r["json_schema_cut"]["finish"], "length");
  EXPECT_FALSE(r["json_schema_cut"]["text"].get<std::string>().empty());

  ASSERT_EQ(r["json_object"].size(), 20u);
  for (const auto& a : r["json_object"]) {
    // This tiny story model rarely closes a string, so answers may run into max_tokens; those that
    // end by themselves must be JSON objects.
    if (a["finish"] == "stop") {
      EXPECT_TRUE(a["parses"].get<bool>()) << a["text"];
    }
    EXPECT_NE(a["text"].get<std::string>().find('{'), std::string::npos) << a["text"];
  }

  EXPECT_EQ(r["tokenize"]["back"], r["tokenize"]["text"]);
  ASSERT_EQ(r["tokenize"]["pieces"].size(), r["tokenize"]["tokens"].size());
  EXPECT_EQ(r["tokenize"]["pieces"][0]["id"], r["tokenize"]["tokens"][0]);
  EXPECT_EQ(r["logit_bias"]["text"], r["logit_bias"]["expected"]);
}

}  // namespace
}  // namespace hz
