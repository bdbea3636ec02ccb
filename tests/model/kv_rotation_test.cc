// A rotated KV cache (kv/kv_rotation.h) in the forward pass: with exact (f32) KV the rotation is
// orthogonal and changes the logits only by rounding, also with grouped-query attention (every
// query head of a group takes its KV head's rotation); chunked prefill and decode read the same
// rotated rows as a whole prefill; with int4 KV it moves the logits closer to exact KV.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::vector<int32_t> prompt(int32_t n, int32_t vocab) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = 1 + (i * 37 + 11) % (vocab - 1);
  return t;
}

std::vector<float> logits(Model& m, ThreadPool& pool, const std::vector<int32_t>& tokens, KvPrecision p, int32_t chunk) {
  SingleSequenceOptions o;
  o.max_tokens = 256;
  o.kv_precision = p;
  SingleSequence s(m, pool, o);
  return chunk > 0 ? s.append_chunked(tokens, chunk) : s.append(tokens, /*all_logits=*/true);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  return d;
}

class KvRotationTest : public ::testing::TestWithParam<const char*> {};

TEST_P(KvRotationTest, ExactKvLogitsChangeOnlyByRounding) {
  auto m = Model::load(test::model_path(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  const auto tokens = prompt(150, (*m)->config().vocab);
  KvPrecision plain{KvType::kF32, 0, KvType::kF32};
  KvPrecision rotated = plain;
  rotated.rotated = true;
  const auto a = logits(**m, pool, tokens, plain, 0);
  const auto b = logits(**m, pool, tokens, rotated, 0);
  ASSERT_FALSE(a.empty());
  EXPECT_LT(max_abs_diff(a, b), 2e-3);
  EXPECT_GT(max_abs_diff(a, b), 0.0);  // the rotation did run (rounding shows)
}

TEST_P(KvRotationTest, RotatedInt4IsCloserToExactAndChunkInvariant) {
  auto m = Model::load(test::model_path(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  const auto tokens = prompt(150, (*m)->config().vocab);
  const auto exact = logits(**m, pool, tokens, {KvType::kF32, 0, KvType::kF32}, 0);
  KvPrecision int4{KvType::kInt4, 0, KvType::kInt4};
  KvPrecision rot = int4;
  rot.rotated = true;
  const auto last = [&](const std::vector<float>& all) {
    const size_t v = static_cast<size_t>((*m)->config().vocab);
    return std::vector<float>(all.end() - static_cast<std::ptrdiff_t>(v), all.end());
  };
  const auto whole = logits(**m, pool, tokens, rot, 0);
  // Chunks of 7 tokens write and read the rotated rows across block boundaries: same last logits.
  const auto chunked = logits(**m, pool, tokens, rot, 7);
  EXPECT_EQ(last(whole), chunked);
  double err_plain = 0, err_rot = 0;
  const auto p = logits(**m, pool, tokens, int4, 0);
  for (size_t i = 0; i < exact.size(); ++i) {
    err_plain += std::fabs(static_cast<double>(p[i]) - exact[i]);
    err_rot += std::fabs(static_cast<double>(whole[i]) - exact[i]);
  }
  std::printf("%s int4 mean |logit error|: rotation off %.5f on %.5f\n", GetParam(), err_plain / exact.size(),
              err_rot / exact.size());
  EXPECT_LT(err_rot, err_plain);
}

// Keys and values rotate independently: with exact KV, rotating only K or only V still changes the
// logits by rounding alone (so each stream is rotated and un-rotated consistently), and the two
// one-stream rotations differ from each other and from rotating both.
TEST_P(KvRotationTest, KeysOrValuesAloneRotateConsistently) {
  auto m = Model::load(test::model_path(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  const auto tokens = prompt(150, (*m)->config().vocab);
  KvPrecision plain{KvType::kF32, 0, KvType::kF32};
  KvPrecision k_only = plain, v_only = plain, both = plain;
  k_only.rotated = true;
  k_only.rotated_v = false;
  v_only.rotated_v = true;
  both.rotated = true;
  const auto a = logits(**m, pool, tokens, plain, 0);
  const auto k = logits(**m, pool, tokens, k_only, 0);
  const auto v = logits(**m, pool, tokens, v_only, 0);
  const auto kv = logits(**m, pool, tokens, both, 0);
  EXPECT_LT(max_abs_diff(a, k), 2e-3);
  EXPECT_LT(max_abs_diff(a, v), 2e-3);
  EXPECT_GT(max_abs_diff(a, k), 0.0);
  EXPECT_GT(max_abs_diff(a, v), 0.0);
  EXPECT_GT(max_abs_diff(k, v), 0.0);
  EXPECT_GT(max_abs_diff(k, kv), 0.0);
}

// stories260K (8 heads, 8 KV heads) and its Qwen2 conversion (8 heads over 4 KV heads: GQA, biases).
INSTANTIATE_TEST_SUITE_P(Models, KvRotationTest, ::testing::Values("stories260K.gguf", "stories260K-qwen2.gguf"));

}  // namespace
}  // namespace hz
