// ModelConfig::from_hf_config: Llama, Mistral and Qwen2 config.json files, RoPE scaling variants,
// errors naming the field; and the GGUF hyper-parameters written back read as the same config.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>

#include "format/gguf.h"
#include "model/hf_config.h"

namespace hz {
namespace {

using json = nlohmann::json;

json llama3_8b() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "vocab_size": 128256, "tie_word_embeddings": false,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
}

TEST(HfConfigTest, Llama3) {
  auto c = ModelConfig::from_hf_config(llama3_8b());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->num_layers, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->ffn, 14336);
  EXPECT_EQ(c->vocab, 128256);
  EXPECT_EQ(c->train_ctx, 131072);
  EXPECT_FLOAT_EQ(c->rope.freq_base, 500000.0f);
  EXPECT_EQ(c->rope.layout, RopeLayout::kNeox);  // HF rows are rotate-half
  EXPECT_EQ(c->rope.scaling, RopeScaling::kLlama3);
  EXPECT_FLOAT_EQ(c->rope.freq_scale, 1.0f / 8.0f);
  EXPECT_EQ(c->rope.orig_ctx, 8192);
  EXPECT_FLOAT_EQ(c->rope.high_freq_factor, 4.0f);
}

TEST(HfConfigTest, MistralAndQwen2) {
  json m = json::parse(R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "vocab_size": 32000})");
  auto c = ModelConfig::from_hf_config(m);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "llama");  // as llama.cpp writes Mistral's dense models
  EXPECT_EQ(c->sliding_window, 4096);
  m["sliding_window"] = nullptr;
  c = ModelConfig::from_hf_config(m);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sliding_window, 0);

  json q = json::parse(R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "use_sliding_window": false,
    "tie_word_embeddings": true, "vocab_size": 151936, "rope_scaling": null})");
  c = ModelConfig::from_hf_config(q);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "qwen2");
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->rope.scaling, RopeScaling::kNone);

  q["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  c = ModelConfig::from_hf_config(q);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope.scaling, RopeScaling::kYarn);
  EXPECT_NEAR(c->rope.attn_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  q["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  c = ModelConfig::from_hf_config(q);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rope.scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(c->rope.freq_scale, 0.5f);
}

TEST(HfConfigTest, ErrorsNameTheField) {
  auto expect_error = [](json j, const std::string& fragment) {
    auto c = ModelConfig::from_hf_config(j, "dir/config.json");
    ASSERT_FALSE(c.ok()) << fragment;
    EXPECT_NE(c.status().message().find("dir/config.json"), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
  };
  json j = llama3_8b();
  j.erase("num_hidden_layers");
  expect_error(j, "'num_hidden_layers' is missing");
  j = llama3_8b();
  j["num_key_value_heads"] = 5;
  expect_error(j, "not a multiple of num_key_value_heads 5");
  j["num_key_value_heads"] = 64;
  expect_error(j, "'num_key_value_heads' = 64 is outside");
  j = llama3_8b();
  j["rope_scaling"]["rope_type"] = "dynamic";
  expect_error(j, "rope_scaling type 'dynamic' is not supported");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", -1}};
  expect_error(j, "rope_scaling.factor");
  j = llama3_8b();
  j["rms_norm_eps"] = "small";
  expect_error(j, "'rms_norm_eps' must be a number");
  j["model_type"] = "bert";
  expect_error(j, "model_type 'bert' is not supported");
  expect_error(json::array(), "not a JSON object");
}

// The hyper-parameters written for a GGUF read back as the same configuration.
TEST(HfConfigTest, GgufHparamsRoundTrip) {
  json j = llama3_8b();
  j["hidden_size"] = 256;
  j["num_attention_heads"] = 4;
  j["num_key_value_heads"] = 2;
  j["head_dim"] = 96;  // not hidden / heads: key_length is written
  j["vocab_size"] = 16;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  auto c = ModelConfig::from_hf_config(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  GgufWriter w;
  for (auto& [k, v] : gguf_hparams(*c)) w.set(k, v);
  std::vector<float> emb(256 * 16, 0.0f);
  w.add_tensor_data("token_embd.weight", DType::kF32, {256, 16}, emb.data());
  auto bytes = w.write_to_memory();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "mem");
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto back = ModelConfig::from_gguf(*f);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->num_layers, c->num_layers);
  EXPECT_EQ(back->hidden, c->hidden);
  EXPECT_EQ(back->num_heads, c->num_heads);
  EXPECT_EQ(back->num_kv_heads, c->num_kv_heads);
  EXPECT_EQ(back->head_dim, 96);
  EXPECT_EQ(back->ffn, c->ffn);
  EXPECT_EQ(back->train_ctx, c->train_ctx);
  EXPECT_FLOAT_EQ(back->rms_eps, c->rms_eps);
  EXPECT_FLOAT_EQ(back->rope.freq_base, c->rope.freq_base);
  EXPECT_EQ(back->rope.scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(back->rope.freq_scale, 0.5f);
  EXPECT_EQ(back->rope.layout, RopeLayout::kNormal);  // GGUF llama rows are permuted back on conversion
}

}  // namespace
}  // namespace hz
