// One source of model shape: the shape the planner sizes (ModelShape) and the configuration the
// engine runs (ModelConfig) read a GGUF with the same defaults for the keys it omits.
#include "model/model_shape.h"

#include <gtest/gtest.h>

#include <string>

#include "model/model_config.h"
#include "support/tiny_model.h"

namespace hz {
namespace {

using test::TinyModel;
using test::TinyModelSpec;

TEST(ModelShapeTest, ExpertWidthsDefaultAsTheEngineReadsThem) {
  // No expert_feed_forward_length / expert_shared_feed_forward_length keys in these files.
  for (const std::string arch : {"qwen2moe", "qwen3moe", "llama"}) {
    TinyModelSpec spec;
    spec.arch = arch;
    spec.experts = 4;
    spec.experts_used = 2;
    spec.ffn = 48;
    const std::string path = ::testing::TempDir() + "/model_shape_" + arch + ".gguf";
    ASSERT_TRUE(TinyModel::random(spec).write(path));
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto cfg = ModelConfig::from_gguf(*f);
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    auto shape = model_shape_from_gguf(*f);
    ASSERT_TRUE(shape.ok()) << shape.status().message();
    EXPECT_EQ(shape->moe_ffn, static_cast<uint64_t>(cfg->expert_ffn)) << arch;
    EXPECT_EQ(shape->moe_ffn, arch == "llama" ? 48u : 24u) << arch << ": Mixtral uses the dense width, Qwen-MoE splits it";
    EXPECT_EQ(shape->num_shared_experts * shape->shared_expert_ffn, static_cast<uint64_t>(cfg->shared_expert_ffn)) << arch;
    EXPECT_EQ(shape->num_layers, static_cast<uint64_t>(cfg->num_layers));
    EXPECT_EQ(shape->num_kv_heads, static_cast<uint64_t>(cfg->num_kv_heads));
    EXPECT_EQ(shape->head_dim, static_cast<uint64_t>(cfg->head_dim));
    EXPECT_EQ(shape->ffn, static_cast<uint64_t>(cfg->ffn));
  }
}

}  // namespace
}  // namespace hz
