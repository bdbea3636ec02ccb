// Packed weights (ModelWeights::pack, HORIZON_PACK): a model loaded with its Q4_0/Q8_0 matrices
// repacked gives bit-identical logits to the same model read in the file's layout, dense and mixture
// of experts, over a prompt long enough to cross the kernels' 32-token chunk; and packing is
// really in use (the test would not notice otherwise). Matrices of other types large enough for a
// huge page are copied into huge-page memory (HORIZON_HUGEPAGES): same logits, and the copy is in use.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/huge_pages.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "model/quantizer.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"
#include "support/tiny_model.h"

namespace hz {
namespace {

std::unique_ptr<Model> load_with_packing(const std::string& path, bool pack) {
  setenv("HORIZON_PACK", pack ? "1" : "0", 1);
  auto m = Model::load(path);
  unsetenv("HORIZON_PACK");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<float> logits(Model& m, int threads, const std::vector<int32_t>& tokens) {
  ThreadPool pool(threads);
  SingleSequence seq(m, pool, {.max_tokens = 128, .kv_dtype = DType::kF32});
  return seq.append(tokens, /*all_logits=*/true);
}

void expect_same_logits(const std::string& path, bool expect_experts) {
  auto plain = load_with_packing(path, false);
  auto packed = load_with_packing(path, true);
  ASSERT_TRUE(plain && packed);
  const LayerWeights& L = packed->weights().layers[0];
  EXPECT_EQ(plain->weights().layers[0].wq.packed, nullptr);
  EXPECT_NE(L.wq.packed, nullptr) << "packing not in use";
  if (expect_experts) {
    EXPECT_NE(L.gate_exps.m.packed, nullptr) << "experts not packed";
  }
  std::vector<int32_t> tokens;
  for (int i = 0; i < 45; ++i) tokens.push_back(1 + (i * 37) % 200);
  for (int threads : {1, 2}) {
    const auto a = logits(*plain, threads, tokens);
    const auto b = logits(*packed, threads, tokens);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << path << " threads=" << threads;
  }
}

TEST(PackedWeightsTest, DenseQ4_0AndQ8_0LogitsAreBitIdentical) {
  expect_same_logits(test::model_path("stories260K-q4_0.gguf"), false);
  expect_same_logits(test::model_path("stories260K-q8_0.gguf"), false);
}

TEST(PackedWeightsTest, MixtureOfExpertsLogitsAreBitIdentical) {
  const std::string out = test::make_temp_dir("packed_weights_test") + "/moe4-q4_0.gguf";
  QuantizeOptions o;
  o.type = DType::kQ4_0;
  ASSERT_TRUE(quantize_model(test::model_path("stories260K-moe4.gguf"), out, o).ok());
  expect_same_logits(out, true);
}

// F32 weights with FFN matrices of exactly 2 MiB (2048 x 256 floats): copied out of the file into
// 2 MiB-aligned memory; smaller matrices stay in the file's mapping.
TEST(PackedWeightsTest, LargeFloatMatricesAreCopiedWithTheSameLogits) {
  if (!huge_pages_for_weights()) {
    GTEST_SKIP() << "no huge pages for weights here (HORIZON_HUGEPAGES=0 or transparent huge pages '"
                 << transparent_huge_page_mode() << "'): large matrices stay in the file";
  }
  const std::string path = test::make_temp_dir("packed_weights_test") + "/f32-wide.gguf";
  test::TinyModelSpec spec;
  spec.layers = 1;
  spec.hidden = 256;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 64;
  spec.ffn = 2048;
  ASSERT_TRUE(test::TinyModel::random(spec).write(path));
  auto plain = load_with_packing(path, false);
  auto copied = load_with_packing(path, true);
  ASSERT_TRUE(plain && copied);
  const LayerWeights& P = plain->weights().layers[0];
  const LayerWeights& C = copied->weights().layers[0];
  ASSERT_EQ(C.w_up.row_bytes * C.w_up.rows, 2u << 20);
  EXPECT_NE(C.w_up.data, P.w_up.data) << "large matrix not copied";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(C.w_up.data) % (2u << 20), 0u);
  EXPECT_EQ(C.w_up.packed, nullptr);
  EXPECT_EQ(0, std::memcmp(C.w_up.data, P.w_up.data, C.w_up.row_bytes * C.w_up.rows));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(C.wq.data) - reinterpret_cast<uintptr_t>(P.wq.data),
            reinterpret_cast<uintptr_t>(C.wk.data) - reinterpret_cast<uintptr_t>(P.wk.data))
      << "small matrices should stay at their offsets in the file";
  std::vector<int32_t> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back(1 + (i * 7) % 60);
  const auto a = logits(*plain, 2, tokens);
  const auto b = logits(*copied, 2, tokens);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

}  // namespace
}  // namespace hz
