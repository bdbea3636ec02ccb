// Compact KV types through the model: logits are bit-identical whether the prompt is prefilled
// whole, in chunks of 7 or token by token (the position rule makes reads chunk-invariant), for
// int8, fp8, int4 and hot windows, on head dims 8 (stories260K) and 32 (synth-tiny); and the types
// really are in use (their logits differ from f16's).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % (vocab - 3)) + 3;
  return t;
}

std::vector<float> logits_chunked(Model& m, ThreadPool& pool, const std::vector<int32_t>& tokens, int chunk,
                                  KvPrecision p, int32_t block_tokens = 16) {
  SingleSequenceOptions o;
  o.max_tokens = 1024;
  o.block_tokens = block_tokens;
  o.kv_precision = p;
  SingleSequence seq(m, pool, o);
  std::vector<float> out;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    std::vector<int32_t> part(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + chunk));
    const auto& l = seq.append(part, /*all_logits=*/true);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

struct Param {
  const char* model;
  const char* name;
  KvPrecision p;
};

// Keys in k, values in v (the cold types under a window of f16 when window > 0).
KvPrecision split(KvType k, KvType v, uint64_t window = 0, uint64_t sinks = 0) {
  KvPrecision p;
  if (window > 0) {
    p.hot_window = window;
    p.cold = k;
    p.cold_v = v;
    p.sink_tokens = sinks;
  } else {
    p.hot = p.cold = k;
    p.hot_v = p.cold_v = v;
  }
  return p;
}

class KvTypesInvarianceTest : public ::testing::TestWithParam<Param> {};

TEST_P(KvTypesInvarianceTest, ChunkingDoesNotChangeLogits) {
  auto m = Model::load(test::model_path(GetParam().model));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  auto tokens = random_tokens(150, (*m)->config().vocab, 5);
  std::vector<float> whole = logits_chunked(**m, pool, tokens, 1000, GetParam().p);
  for (int chunk : {1, 7}) {
    std::vector<float> chunked = logits_chunked(**m, pool, tokens, chunk, GetParam().p);
    ASSERT_EQ(whole.size(), chunked.size());
    EXPECT_EQ(0, std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float))) << "chunk " << chunk;
  }
  // The compact type is in use: past the first block the logits move away from f16's.
  std::vector<float> f16 = logits_chunked(**m, pool, tokens, 1000, KvPrecision{KvType::kF16, 0, KvType::kF16});
  EXPECT_NE(0, std::memcmp(whole.data(), f16.data(), whole.size() * sizeof(float)));
  // ...but not in the first block, which every query in it reads exactly (f16).
  const size_t vocab = static_cast<size_t>((*m)->config().vocab);
  EXPECT_EQ(0, std::memcmp(whole.data(), f16.data(), 16 * vocab * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(
    Types, KvTypesInvarianceTest,
    ::testing::Values(Param{"stories260K.gguf", "stories_int8", {KvType::kInt8, 0, KvType::kInt8}},
                      Param{"synth-tiny-f16.gguf", "synth_int8", {KvType::kInt8, 0, KvType::kInt8}},
                      Param{"synth-tiny-f16.gguf", "synth_fp8", {KvType::kFp8, 0, KvType::kFp8}},
                      Param{"synth-tiny-f16.gguf", "synth_int4", {KvType::kInt4, 0, KvType::kInt4}},
                      Param{"synth-tiny-f16.gguf", "synth_int4c", {KvType::kInt4c, 0, KvType::kInt4c}},
                      Param{"stories260K.gguf", "stories_int8c", {KvType::kInt8c, 0, KvType::kInt8c}},
                      Param{"stories260K.gguf", "stories_hot40_int4c", {KvType::kF16, 40, KvType::kInt4c}},
                      Param{"stories260K.gguf", "stories_hot40_int4", {KvType::kF16, 40, KvType::kInt4}},
                      Param{"synth-tiny-f16.gguf", "synth_hot20_int4", {KvType::kF16, 20, KvType::kInt4}},
                      Param{"synth-tiny-f16.gguf", "synth_int8_hot33_int4", {KvType::kInt8, 33, KvType::kInt4}},
                      Param{"stories260K.gguf", "stories_k8c_v4c", split(KvType::kInt8c, KvType::kInt4c)},
                      Param{"synth-tiny-f16.gguf", "synth_k4c_v4", split(KvType::kInt4c, KvType::kInt4)},
                      Param{"stories260K.gguf", "stories_hot32_k3_v2_sinks4", split(KvType::kInt3, KvType::kInt2, 32, 4)}),
    [](const auto& info) { return std::string(info.param.name); });

// Block sizes 16, 64 and 256 give bit-identical f16 logits (attention tiles by position, not block).
TEST(KvBlockSizeTest, F16LogitsIdenticalForBlockSizes16_64_256) {
  auto m = Model::load(test::model_path("synth-tiny-f16.gguf"));
  ASSERT_TRUE(m.ok());
  ThreadPool pool(2);
  auto tokens = random_tokens(300, (*m)->config().vocab, 8);
  KvPrecision f16{KvType::kF16, 0, KvType::kF16};
  std::vector<float> a = logits_chunked(**m, pool, tokens, 100, f16, 16);
  std::vector<float> b = logits_chunked(**m, pool, tokens, 100, f16, 64);
  std::vector<float> c = logits_chunked(**m, pool, tokens, 100, f16, 256);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4));
}

// SingleSequence honours prefill_chunk: a 300-token append in chunks of 64 equals one call.
TEST(KvBlockSizeTest, SingleSequencePrefillChunk) {
  auto m = Model::load(test::model_path("synth-tiny-f16.gguf"));
  ASSERT_TRUE(m.ok());
  ThreadPool pool(2);
  auto tokens = random_tokens(300, (*m)->config().vocab, 9);
  SingleSequenceOptions o;
  o.max_tokens = 512;
  o.kv_precision = KvPrecision{KvType::kInt8, 0, KvType::kInt8};
  SingleSequence whole(**m, pool, o);
  std::vector<float> a = whole.append(tokens, true);
  o.prefill_chunk = 64;
  SingleSequence chunked(**m, pool, o);
  std::vector<float> b = chunked.append(tokens, true);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  EXPECT_EQ(chunked.num_tokens(), 300);
  // Staging holds at most the blocks one chunk touches, not the whole prompt.
  EXPECT_LE(chunked.kv().num_staging_slots(), 64 / 16 + 1);
}

}  // namespace
}  // namespace hz
