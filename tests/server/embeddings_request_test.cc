// /v1/embeddings request parsing (input forms, encoding_format, refusals naming the field), the
// response shape, and base64 against RFC 4648's test vectors.
#include "server/embeddings.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace hz {
namespace {

using nlohmann::json;

TEST(EmbeddingsRequestTest, InputForms) {
  EmbeddingsRequest r;
  ASSERT_FALSE(parse_embeddings_request(R"({"input": "a", "model": "m", "user": "u"})", &r));
  EXPECT_EQ(r.texts, std::vector<std::string>{"a"});
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.base64);
  ASSERT_FALSE(parse_embeddings_request(R"({"input": ["a", "b"], "encoding_format": "base64"})", &r));
  EXPECT_EQ(r.texts.size(), 2u);
  EXPECT_TRUE(r.base64);
  ASSERT_FALSE(parse_embeddings_request(R"({"input": [1, 2, 3]})", &r));
  EXPECT_EQ(r.token_inputs, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  ASSERT_FALSE(parse_embeddings_request(R"({"input": [[1], [2, 3]]})", &r));
  EXPECT_EQ(r.token_inputs.size(), 2u);
}

TEST(EmbeddingsRequestTest, RefusalsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": ""})", "input"},
      {R"({"input": ["a", ""]})", "input[1]"},
      {R"({"input": ["a", [1]]})", "input[1]"},
      {R"({"input": [[1], [-2]]})", "input[1][0]"},
      {R"({"input": 5})", "input"},
      {R"({"input": "a", "encoding_format": "hex"})", "encoding_format"},
      {R"({"input": "a", "dimensions": 3})", "dimensions"},
      {R"({"input": "a", "pooling": "cls"})", "pooling"},
  };
  for (const auto& [body, param] : cases) {
    EmbeddingsRequest r;
    auto e = parse_embeddings_request(body, &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, param) << body << " -> " << e->message;
  }
}

TEST(EmbeddingsResponseTest, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  json j = json::parse(embeddings_body({{1.0f, -2.5f}}, /*base64=*/true, "m", 4));
  EXPECT_EQ(j["data"][0]["embedding"], "AACAPwAAIMA=");  // 0x3F800000, 0xC0200000 little-endian
  j = json::parse(embeddings_body({{1.0f, -2.5f}, {0.5f}}, /*base64=*/false, "m", 4));
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][0]["embedding"], json({1.0, -2.5}));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["model"], "m");
}

}  // namespace
}  // namespace hz
