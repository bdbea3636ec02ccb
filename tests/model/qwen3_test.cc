// Dense architectures on tiny random GGUFs against the plain-loop reference: qwen3's per-head q/k
// RMSNorm (and that it matters), qwen2's q/k/v biases with NeoX RoPE, llama as the baseline.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"
#include "support/tiny_model.h"

namespace hz {
namespace {

using test::TinyModel;
using test::TinyModelSpec;

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct TinyRun {
  TinyModel tm;
  std::vector<int32_t> tokens;
  std::vector<float> engine;
};

TinyRun run_tiny(const TinyModelSpec& spec, const std::string& name) {
  static const std::string dir = test::make_temp_dir("arch_dense_test");
  TinyRun r{TinyModel::random(spec), {}, {}};
  const std::string path = dir + "/" + name + ".gguf";
  EXPECT_TRUE(r.tm.write(path));
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return r;
  std::mt19937 rng(4);
  for (int i = 0; i < 20; ++i) r.tokens.push_back(static_cast<int32_t>(rng() % spec.vocab));
  ThreadPool pool(2);
  SingleSequence seq(**m, pool, {.max_tokens = 64, .kv_dtype = DType::kF32});
  r.engine = seq.append(r.tokens, /*all_logits=*/true);
  return r;
}

TEST(Qwen3Test, PerHeadQkNormMatchesReference) {
  TinyModelSpec s;
  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 16;  // head_dim != hidden / heads, as in the real Qwen3 models
  s.seed = 5;
  TinyRun r = run_tiny(s, "qwen3");
  ASSERT_FALSE(r.engine.empty());
  const float diff = max_abs_diff(r.engine, r.tm.reference_logits(r.tokens));
  EXPECT_LT(diff, 2e-4f);
  // The same reference without the norm is far off: the comparison above depends on it.
  const float diff_without = max_abs_diff(r.engine, r.tm.reference_logits(r.tokens, nullptr, /*skip_qk_norm=*/true));
  EXPECT_GT(diff_without, 0.05f);
  RecordProperty("max_abs_diff", std::to_string(diff));
  RecordProperty("max_abs_diff_without_qk_norm", std::to_string(diff_without));
}

TEST(Qwen3Test, Qwen2BiasesMatchReference) {
  TinyModelSpec s;
  s.arch = "qwen2";
  s.qkv_bias = true;
  s.seed = 6;
  TinyRun r = run_tiny(s, "qwen2");
  ASSERT_FALSE(r.engine.empty());
  EXPECT_LT(max_abs_diff(r.engine, r.tm.reference_logits(r.tokens)), 2e-4f);
}

TEST(Qwen3Test, LlamaBaselineMatchesReference) {
  TinyModelSpec s;
  s.seed = 8;
  TinyRun r = run_tiny(s, "llama");
  ASSERT_FALSE(r.engine.empty());
  EXPECT_LT(max_abs_diff(r.engine, r.tm.reference_logits(r.tokens)), 2e-4f);
}

}  // namespace
}  // namespace hz
