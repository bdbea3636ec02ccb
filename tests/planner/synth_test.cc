// `horizon synth`: a scaled-down model of each preset family parses with the expected shapes and
// metadata, loads as a ModelConfig, is reproducible by seed, and bad flags fail cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "format/gguf.h"
#include "model/model_config.h"
#include "model/model_shape.h"
#include "planner/weight_bytes.h"
#include "support/test_support.h"

namespace hz {
namespace {

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("synth"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs synth with `args`, returns the output path (asserting success).
  std::string synth(const std::string& name, const std::string& args) {
    std::string path = dir_ + "/" + name + ".gguf";
    std::string out, err;
    int rc = test::run_command(std::string(HORIZON_BINARY) + " synth -t 2 -o " + path + " " + args, &out, &err);
    EXPECT_EQ(rc, 0) << err;
    return path;
  }
  std::string dir_;
};

void expect_dims(const GgufFile& f, const std::string& name, std::vector<uint64_t> dims, DType t) {
  const GgufTensorInfo* ti = f.get_tensor(name);
  ASSERT_NE(ti, nullptr) << name;
  EXPECT_EQ(ti->dims, dims) << name;
  EXPECT_EQ(ti->dtype, t) << name;
}

TEST_F(SynthTest, LlamaPresetScaledDownKeepsTheRealTokenizer) {
  std::string path = synth("llama1b", "--preset llama-1b --layers 2 --hidden 128 --heads 4 --kv-heads 2 --ffn 256 --type f16");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto src = GgufFile::open(test::testdata_path("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(src.ok());
  // Every tokenizer.* key is copied, and the vocabulary size follows the tokenizer.
  for (const auto& [key, value] : src->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const GgufValue* v = f->find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->to_display_string(), value.to_display_string()) << key;
  }
  EXPECT_EQ((*f->get_string_array("tokenizer.ggml.tokens"))->size(), 32000u);
  EXPECT_EQ(*f->require_string("general.architecture"), "llama");
  EXPECT_EQ(*f->require_uint("llama.block_count"), 2u);
  EXPECT_EQ(*f->require_uint("llama.embedding_length"), 128u);
  EXPECT_EQ(*f->require_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(*f->require_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(*f->require_uint("llama.feed_forward_length"), 256u);
  EXPECT_EQ(*f->require_uint("llama.rope.dimension_count"), 32u);
  EXPECT_EQ(*f->require_uint("llama.context_length"), 131072u);
  EXPECT_EQ(*f->require_uint("general.file_type"), 1u);
  EXPECT_FLOAT_EQ(*f->get_float_or("llama.rope.freq_base", 0), 500000.f);
  expect_dims(*f, "token_embd.weight", {128, 32000}, DType::kF16);
  expect_dims(*f, "blk.1.attn_q.weight", {128, 128}, DType::kF16);
  expect_dims(*f, "blk.1.attn_k.weight", {128, 64}, DType::kF16);
  expect_dims(*f, "blk.1.attn_v.weight", {128, 64}, DType::kF16);
  expect_dims(*f, "blk.1.attn_output.weight", {128, 128}, DType::kF16);
  expect_dims(*f, "blk.1.ffn_gate.weight", {128, 256}, DType::kF16);
  expect_dims(*f, "blk.1.ffn_up.weight", {128, 256}, DType::kF16);
  expect_dims(*f, "blk.1.ffn_down.weight", {256, 128}, DType::kF16);
  expect_dims(*f, "blk.0.attn_norm.weight", {128}, DType::kF32);
  expect_dims(*f, "output_norm.weight", {128}, DType::kF32);
  expect_dims(*f, "output.weight", {128, 32000}, DType::kF16);
  EXPECT_EQ(f->tensors().size(), 1u + 2 * 9 + 2);
  auto cfg = ModelConfig::from_gguf(*f);
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  EXPECT_EQ(cfg->vocab, 32000);
  EXPECT_EQ(cfg->head_dim, 32);
}

TEST_F(SynthTest, Llama8bFamilyQ8_0WithByteVocab) {
  std::string path = synth("llama8b", "--preset llama-8b --layers 1 --hidden 64 --heads 4 --kv-heads 1 --ffn 96 --vocab 512 --type q8_0");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f->require_string("tokenizer.ggml.model"), "llama");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ((*tokens)->size(), 512u);
  EXPECT_EQ((**tokens)[3], "<0x00>");
  EXPECT_EQ((**tokens)[258], "<0xFF>");
  EXPECT_EQ(*f->require_uint("general.file_type"), 7u);
  expect_dims(*f, "token_embd.weight", {64, 512}, DType::kQ8_0);
  expect_dims(*f, "blk.0.ffn_down.weight", {96, 64}, DType::kQ8_0);
  expect_dims(*f, "blk.0.attn_k.weight", {64, 16}, DType::kQ8_0);
  ASSERT_TRUE(ModelConfig::from_gguf(*f).ok());
}

TEST_F(SynthTest, Qwen2FamilyHasBiasesAndTiedHead) {
  std::string path = synth("qwen2", "--preset qwen2-0.5b --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 --type f32");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f->require_string("general.architecture"), "qwen2");
  EXPECT_EQ(*f->require_uint("qwen2.block_count"), 2u);
  EXPECT_FLOAT_EQ(*f->get_float_or("qwen2.rope.freq_base", 0), 1e6f);
  expect_dims(*f, "blk.0.attn_q.bias", {64}, DType::kF32);
  expect_dims(*f, "blk.0.attn_k.bias", {32}, DType::kF32);
  expect_dims(*f, "blk.1.attn_v.bias", {32}, DType::kF32);
  EXPECT_EQ(f->get_tensor("output.weight"), nullptr);  // tied to token_embd
  auto shape = model_shape_from_gguf(*f);
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  EXPECT_TRUE(shape->tied_embeddings);
  EXPECT_TRUE(shape->attention_bias);
  ModelShape formula = *shape;
  formula.file_params.reset();
  EXPECT_EQ(count_params(formula).total, *shape->file_params);  // the planner's tensor list matches
  // Weights look like normal(0, 0.02); norms are 1, biases 0.
  const GgufTensorInfo* q = f->get_tensor("blk.0.attn_q.weight");
  const float* w = reinterpret_cast<const float*>(q->data);
  double sum = 0, sq = 0;
  for (uint64_t i = 0; i < q->num_elements(); ++i) {
    sum += w[i];
    sq += double(w[i]) * w[i];
  }
  double mean = sum / q->num_elements(), sd = std::sqrt(sq / q->num_elements() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.002);
  EXPECT_EQ(reinterpret_cast<const float*>(f->get_tensor("blk.0.ffn_norm.weight")->data)[5], 1.0f);
  EXPECT_EQ(reinterpret_cast<const float*>(f->get_tensor("blk.0.attn_k.bias")->data)[3], 0.0f);
}

TEST_F(SynthTest, MixtralFamilyHasExperts) {
  std::string path = synth("mixtral", "--preset mixtral-tiny --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 64 --experts 4 --experts-used 2 --vocab 300 --type q4_0");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f->require_uint("llama.expert_count"), 4u);
  EXPECT_EQ(*f->require_uint("llama.expert_used_count"), 2u);
  EXPECT_EQ(*f->require_uint("general.file_type"), 2u);
  expect_dims(*f, "blk.0.ffn_gate_inp.weight", {64, 4}, DType::kF32);
  expect_dims(*f, "blk.0.ffn_gate_exps.weight", {64, 64, 4}, DType::kQ4_0);
  expect_dims(*f, "blk.0.ffn_up_exps.weight", {64, 64, 4}, DType::kQ4_0);
  expect_dims(*f, "blk.1.ffn_down_exps.weight", {64, 64, 4}, DType::kQ4_0);
  EXPECT_EQ(f->get_tensor("blk.0.ffn_gate.weight"), nullptr);
  auto cfg = ModelConfig::from_gguf(*f);
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  EXPECT_EQ(cfg->num_experts, 4);
  auto shape = model_shape_from_gguf(*f);
  ASSERT_TRUE(shape.ok());
  EXPECT_LT(count_params(*shape).active, count_params(*shape).total);
}

TEST_F(SynthTest, RowsThatAreNotWholeBlocksFallBackToF16) {
  std::string path = synth("odd", "--layers 1 --hidden 64 --heads 2 --kv-heads 2 --ffn 80 --vocab 300 --type q4_0");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  expect_dims(*f, "blk.0.ffn_down.weight", {80, 64}, DType::kF16);
  expect_dims(*f, "blk.0.ffn_up.weight", {64, 80}, DType::kQ4_0);
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(SynthTest, SameSeedSameBytes) {
  const std::string shape = "--layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 96 --vocab 300 --type q8_0";
  std::string a = synth("a", shape + " --seed 7");
  std::string b = slurp(a);
  // Same seed with a different thread count: identical file.
  std::string path_b = dir_ + "/b.gguf";
  ASSERT_EQ(test::run_command(std::string(HORIZON_BINARY) + " synth -t 1 -o " + path_b + " " + shape + " --seed 7"), 0);
  EXPECT_EQ(slurp(path_b), b);
  std::string c = synth("c", shape + " --seed 8");
  EXPECT_NE(slurp(c), b);
  EXPECT_EQ(slurp(c).size(), b.size());
}

// --outlier-channels: K's rows of the chosen channels (RoPE pairs, same in every head of a layer)
// are outlier_scale x the others, the matching query rows 1/outlier_scale x; --output-scale scales
// the head. Everything else is the plain model's bytes.
TEST_F(SynthTest, OutlierChannelsAndOutputScale) {
  const std::string shape = "--layers 2 --hidden 128 --heads 4 --kv-heads 2 --ffn 96 --vocab 300 --type f32 --seed 3";
  auto plain = GgufFile::open(synth("plain", shape));
  auto out = GgufFile::open(synth("outl", shape + " --outlier-channels 4 --outlier-scale 20 --output-scale 8"));
  ASSERT_TRUE(plain.ok() && out.ok());
  const uint64_t hd = 32, n = 128;
  auto row = [](const GgufFile& f, const std::string& name, uint64_t r) {
    return reinterpret_cast<const float*>(f.get_tensor(name)->data) + r * 128;
  };
  for (int layer = 0; layer < 2; ++layer) {
    const std::string k = "blk." + std::to_string(layer) + ".attn_k.weight";
    const std::string q = "blk." + std::to_string(layer) + ".attn_q.weight";
    std::vector<uint64_t> scaled;  // channels of head 0
    for (uint64_t c = 0; c < hd; ++c) {
      const float ratio = row(*out, k, c)[0] / row(*plain, k, c)[0];
      if (std::fabs(ratio - 1.0f) > 1e-5f) {
        EXPECT_NEAR(ratio, 20.0f, 1e-3f) << k << " channel " << c;
        scaled.push_back(c);
      }
    }
    ASSERT_EQ(scaled.size(), 4u) << k;
    EXPECT_EQ(scaled[0] % 2, 0u);  // whole RoPE pairs
    EXPECT_EQ(scaled[1], scaled[0] + 1);
    EXPECT_EQ(scaled[3], scaled[2] + 1);
    for (uint64_t head = 0; head < 4; ++head) {  // query heads: the same channels, scaled down
      for (uint64_t c = 0; c < hd; ++c) {
        const bool is_outlier = std::find(scaled.begin(), scaled.end(), c) != scaled.end();
        const float ratio = row(*out, q, head * hd + c)[5] / row(*plain, q, head * hd + c)[5];
        EXPECT_NEAR(ratio, is_outlier ? 0.05f : 1.0f, 1e-5f) << q << " head " << head << " channel " << c;
      }
    }
  }
  const float head_ratio = row(*out, "output.weight", 7)[3] / row(*plain, "output.weight", 7)[3];
  EXPECT_NEAR(head_ratio, 8.0f, 1e-4f);
  for (uint64_t i = 0; i < n; ++i) {  // untouched tensors keep their bytes
    EXPECT_EQ(row(*out, "blk.1.attn_v.weight", 9)[i], row(*plain, "blk.1.attn_v.weight", 9)[i]);
  }
}

TEST_F(SynthTest, BadFlagsFail) {
  const std::string bin = std::string(HORIZON_BINARY) + " synth -o " + dir_ + "/x.gguf ";
  struct Case {
    std::string args, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"--type q2_K", "--type"},
           {"--preset gpt-5", "--preset"},
           {"--hidden 65 --heads 4", "--hidden 65 is not a multiple of --heads 4"},
           {"--heads 4 --kv-heads 3", "--kv-heads"},
           {"--vocab 100", "--vocab 100"},
           {"--experts 4 --experts-used 5", "--experts-used"},
           {"--layers 0", "--layers"},
           {"--layers -5", "--layers -5 is out of range"},
           {"--hidden -64", "--hidden -64 is out of range"},
           {"--tokenizer-from " + test::testdata_path("vocab/ggml-vocab-llama-spm.gguf") + " --vocab 100", "disagrees"},
           {"--tokenizer-from /nonexistent.gguf", "--tokenizer-from"},
           {"--hidden 64 --heads 4 --outlier-channels 3", "--outlier-channels 3"},
           {"--hidden 64 --heads 4 --outlier-channels 10", "--outlier-channels 10"},
           {"--outlier-channels 2 --outlier-scale 0", "--outlier-scale"},
           {"--preset qwen2-0.5b --layers 1 --output-scale 4", "--output-scale"},
       }) {
    std::string err;
    EXPECT_NE(test::run_command(bin + c.args, nullptr, &err), 0) << c.args;
    EXPECT_NE(err.find(c.needle), std::string::npos) << c.args << ": " << err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.gguf"));
}

}  // namespace
}  // namespace hz
