// /v1/embeddings on stories260K through the official openai client: unit-norm vectors of the
// model's hidden size, base64 decodes to the float vector, a text's vector is bit-identical alone,
// in a batch and in another order, token-id input equals its text; --embeddings is required, and
// the two poolings differ.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/server_process.h"
#include "support/test_support.h"

namespace hz {
namespace {

using nlohmann::json;

json run_script(const test::ServerProcess& srv) {
  std::string out, err;
  const std::string script = std::string(HORIZON_SOURCE_DIR) + "/tests/e2e/openai_embeddings.mjs";
  const int rc = test::run_command("node " + script + " " + srv.base_url(), &out, &err);
  EXPECT_EQ(rc, 0) << err << "\n" << srv.log();
  return rc == 0 ? json::parse(out) : json::object();
}

std::string first_vector(const test::ServerProcess& srv, const std::string& text) {
  std::string body;
  const int status = test::http_request("POST", srv.base_url() + "/v1/embeddings",
                                        json{{"input", text}, {"encoding_format", "base64"}}.dump(), &body);
  EXPECT_EQ(status, 200) << body;
  json j = json::parse(body, nullptr, false);
  return j.is_object() && j.contains("data") ? j["data"][0]["embedding"].get<std::string>() : "";
}

TEST(EmbeddingsE2ETest, OpenAIClientVectorsAreNormalisedAndBatchIndependent) {
  test::ServerProcess srv({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--embeddings"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  const json r = run_script(srv);
  ASSERT_TRUE(r.contains("client")) << r.dump();
  EXPECT_EQ(r["client"]["n"], 3);
  EXPECT_EQ(r["client"]["object"], "list");
  for (const auto& d : r["client"]["dims"]) EXPECT_EQ(d, 64);  // stories260K's hidden size
  for (const auto& n : r["client"]["norms"]) EXPECT_NEAR(n.get<double>(), 1.0, 1e-5);
  EXPECT_GT(r["client"]["usage"]["prompt_tokens"].get<int>(), 3);
  EXPECT_TRUE(r["float_equals_client"].get<bool>());
  EXPECT_TRUE(r["base64_decodes_to_float"].get<bool>());
  EXPECT_TRUE(r["batch_equals_single"].get<bool>());
  EXPECT_TRUE(r["order_independent"].get<bool>());
  EXPECT_TRUE(r["distinct"].get<bool>());
  EXPECT_TRUE(r["tokens_equal_text"].get<bool>());
  EXPECT_EQ(r["errors"]["wrong_model"], 404);
  EXPECT_EQ(r["errors"]["empty"], "input");
  EXPECT_EQ(r["errors"]["dimensions"], "dimensions");
  EXPECT_EQ(r["errors"]["format"], "encoding_format");
}

TEST(EmbeddingsE2ETest, OffByDefaultAndPoolingsDiffer) {
  test::ServerProcess off({"-m", test::model_path("stories260K.gguf"), "--threads", "2"});
  ASSERT_TRUE(off.ok()) << off.log();
  std::string body;
  EXPECT_EQ(test::http_request("POST", off.base_url() + "/v1/embeddings", R"({"input": "a"})", &body), 501);
  EXPECT_NE(body.find("--embeddings"), std::string::npos) << body;
  off.terminate();

  test::ServerProcess mean({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--embeddings"});
  test::ServerProcess last({"-m", test::model_path("stories260K.gguf"), "--threads", "2", "--embeddings", "--pooling", "last"});
  ASSERT_TRUE(mean.ok() && last.ok()) << mean.log() << last.log();
  const std::string a = first_vector(mean, "Once upon a time"), b = first_vector(last, "Once upon a time");
  EXPECT_FALSE(a.empty());
  EXPECT_FALSE(b.empty());
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace hz
