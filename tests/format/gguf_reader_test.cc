#include "format/gguf.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace hz {
namespace {

TEST(GgufReaderTest, ReadsStories260K) {
  auto f = GgufFile::open(test::model_path("stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  auto arch = f->require_string("general.architecture");
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ(*arch, "llama");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ((*tokens)->size(), 512u);
  const GgufTensorInfo* emb = f->get_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dims[0], 64u);
  EXPECT_EQ(emb->dims[1], 512u);
}

TEST(GgufWriterTest, RoundTripsMetadataAndTensors) {
  GgufWriter w;
  w.set_str("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("x.f", 1.5f);
  w.set_bool("x.b", true);
  w.set("x.arr", GgufValue::make_str_array({"a", "bc", ""}));
  w.set("x.farr", GgufValue::make_f32_array({1.f, -2.f}));
  std::vector<float> data(6);
  for (int i = 0; i < 6; ++i) data[i] = static_cast<float>(i);
  w.add_tensor_data("t", DType::kF32, {3, 2}, data.data());
  auto bytes = w.write_to_memory();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "mem");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f->require_uint("llama.block_count"), 2u);
  EXPECT_EQ(*f->get_float_or("x.f", 0), 1.5);
  EXPECT_TRUE(*f->get_bool_or("x.b", false));
  auto arr = f->get_string_array("x.arr");
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ((**arr)[1], "bc");
  EXPECT_EQ((*f->get_f32_array("x.farr"))[1], -2.f);
  const GgufTensorInfo* t = f->get_tensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->num_bytes, 24u);
  EXPECT_EQ(reinterpret_cast<const float*>(t->data)[5], 5.f);
}

}  // namespace
}  // namespace hz
