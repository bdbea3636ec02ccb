// The shared golden files (llama.cpp's outputs) against our forward pass, at the README's tolerances.
#include <gtest/gtest.h>

#include <cmath>

#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/golden.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::unique_ptr<Model> load(const std::string& file) {
  auto m = Model::load(test::model_path(file));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Greedy decoding must reproduce every output id; top-5 probabilities within `tol`.
void check_greedy(const std::string& model_file, const std::string& golden_file, float tol, DType kv_dtype) {
  auto model = load(model_file);
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  test::GoldenFile g = test::load_golden(golden_file);
  const int vocab = model->config().vocab;
  for (const auto& c : g.cases) {
    SCOPED_TRACE(c.prompt);
    SingleSequence seq(*model, pool, {.max_tokens = 512, .block_tokens = 16, .kv_dtype = kv_dtype});
    std::vector<float> logits = seq.append(c.prompt_ids);
    for (size_t step = 0; step < c.output_ids.size(); ++step) {
      int32_t tok = test::argmax(logits.data(), vocab);
      ASSERT_EQ(tok, c.output_ids[step]) << "step " << step;
      auto p = test::softmax_probs(logits.data(), vocab);
      for (const auto& [id, prob] : c.top5[step]) EXPECT_NEAR(p[id], prob, tol) << "step " << step << " token " << id;
      logits = seq.append({tok});
    }
  }
}

// Teacher-forced: feed the golden ids, compare each step's top-5 probabilities.
void check_teacher_forced(const std::string& model_file, const std::string& golden_file, float tol, float* max_err) {
  auto model = load(model_file);
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  test::GoldenFile g = test::load_golden(golden_file);
  const int vocab = model->config().vocab;
  *max_err = 0;
  for (const auto& c : g.cases) {
    SingleSequence seq(*model, pool, {.max_tokens = 512});
    std::vector<float> logits = seq.append(c.prompt_ids);
    for (size_t step = 0; step < c.output_ids.size(); ++step) {
      auto p = test::softmax_probs(logits.data(), vocab);
      for (const auto& [id, prob] : c.top5[step]) {
        *max_err = std::max(*max_err, std::fabs(p[id] - prob));
        EXPECT_NEAR(p[id], prob, tol) << c.prompt << " step " << step << " token " << id;
      }
      logits = seq.append({c.output_ids[step]});
    }
  }
}

// Prompt ids are given; compare the whole logits vector at the last prompt position.
void check_last_logits(const std::string& model_file, const std::string& golden_file, float tol) {
  auto model = load(model_file);
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  test::GoldenFile g = test::load_golden(golden_file);
  for (const auto& c : g.cases) {
    SingleSequence seq(*model, pool, {.max_tokens = 512});
    const std::vector<float>& logits = seq.append(c.prompt_ids);
    ASSERT_EQ(logits.size(), c.prompt_last_logits.size());
    float max_diff = 0;
    for (size_t i = 0; i < logits.size(); ++i) max_diff = std::max(max_diff, std::fabs(logits[i] - c.prompt_last_logits[i]));
    EXPECT_LE(max_diff, tol) << c.prompt;
    ::testing::Test::RecordProperty("max_abs_diff_" + std::to_string(&c - &g.cases[0]), std::to_string(max_diff));
  }
}

TEST(GoldenTest, Stories260KGreedyF32Kv) { check_greedy("stories260K.gguf", "stories260K.json", 3e-3f, DType::kF32); }
TEST(GoldenTest, Stories260KGreedyF16Kv) { check_greedy("stories260K.gguf", "stories260K.json", 3e-3f, DType::kF16); }

TEST(GoldenTest, Stories260KQ8_0TeacherForced) {
  float err;
  check_teacher_forced("stories260K-q8_0.gguf", "stories260K-q8_0.json", 0.05f, &err);
  RecordProperty("max_prob_err", std::to_string(err));
}
TEST(GoldenTest, Stories260KQ4_0TeacherForced) {
  float err;
  check_teacher_forced("stories260K-q4_0.gguf", "stories260K-q4_0.json", 0.05f, &err);
  RecordProperty("max_prob_err", std::to_string(err));
}

TEST(GoldenTest, LlamaTinyRandomLastLogits) { check_last_logits("llama-2-tiny-random.gguf", "llama-2-tiny-random.json", 1e-3f); }
TEST(GoldenTest, SynthTinyF16LastLogits) { check_last_logits("synth-tiny-f16.gguf", "synth-tiny-f16.json", 0.01f); }
TEST(GoldenTest, SynthTinyQ8_0LastLogits) { check_last_logits("synth-tiny-q8_0.gguf", "synth-tiny-q8_0.json", 0.1f); }
TEST(GoldenTest, SynthTinyQ4_0LastLogits) { check_last_logits("synth-tiny-q4_0.gguf", "synth-tiny-q4_0.json", 0.2f); }

}  // namespace
}  // namespace hz

namespace hz {
namespace {

// The qwen2 rebuild of stories260K (NeoX RoPE, reordered q/k rows, zero biases) gives the dense
// model's outputs.
TEST(GoldenTest, Stories260KQwen2GreedyMatchesDense) {
  check_greedy("stories260K-qwen2.gguf", "stories260K.json", 3e-3f, DType::kF16);
}

// The Mixtral-style rebuild (4 experts, top-2, random router; every expert is the dense FFN with its
// hidden units permuted) gives the dense model's outputs when routing renormalises the top-2 weights.
TEST(GoldenTest, Stories260KMoe4GreedyMatchesDense) {
  check_greedy("stories260K-moe4.gguf", "stories260K.json", 3e-3f, DType::kF16);
}
TEST(GoldenTest, Stories260KMoe4GreedyF32KvMatchesDense) {
  check_greedy("stories260K-moe4.gguf", "stories260K.json", 3e-3f, DType::kF32);
}

// K-quant layouts (Q4_K, Q5_K, Q6_K mixes written by llama.cpp's quantizer).
TEST(GoldenTest, SynthSmallQ4_K_MLastLogits) { check_last_logits("synth-small-q4_k_m.gguf", "synth-small-q4_k_m.json", 0.25f); }
TEST(GoldenTest, SynthSmallQ5_K_MLastLogits) { check_last_logits("synth-small-q5_k_m.gguf", "synth-small-q5_k_m.json", 0.25f); }
TEST(GoldenTest, SynthSmallQ6_KLastLogits) { check_last_logits("synth-small-q6_k.gguf", "synth-small-q6_k.json", 0.25f); }

}  // namespace
}  // namespace hz
