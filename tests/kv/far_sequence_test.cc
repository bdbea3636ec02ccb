// A running sequence longer than its RAM pool: its finalized blocks move to the far tier and
// attention reads them from disk. The logits must be bit-identical to an all-RAM run for every KV
// type (f16, int8, fp8, and a hot window over int4), through synthetic depth, chunked prefill and
// decode; the RAM pool really is the bound (blocks on disk, pool size unchanged).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/forked_run.h"
#include "support/test_support.h"

namespace hz {
namespace {

constexpr int64_t kDepth = 1500;
constexpr int32_t kPrompt = 150;
constexpr int32_t kGen = 6;
constexpr int32_t kRamTokens = 256;  // 16 blocks

// Every step's logits, concatenated.
std::vector<float> run(Model& m, ThreadPool& pool, const KvPrecision& prec, const std::string& far_dir,
                       uint64_t* far_blocks = nullptr) {
  SingleSequenceOptions so;
  so.max_tokens = 4096;
  so.kv_precision = prec;
  so.prefill_chunk = 64;
  if (!far_dir.empty()) so.ram_tokens = kRamTokens;
  SingleSequence seq(m, pool, so);
  if (!far_dir.empty()) {
    Status st = seq.enable_far(far_dir, uint64_t{64} << 20);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  EXPECT_TRUE(seq.fill_synthetic(kDepth, 3).ok());
  std::mt19937 rng(11);
  std::vector<int32_t> prompt(kPrompt);
  for (auto& t : prompt) t = 3 + static_cast<int32_t>(rng() % 500);
  std::vector<float> all = seq.append(prompt);
  for (int32_t i = 0; i < kGen; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(all.end() - m.config().vocab, all.end()) -
                                              (all.end() - m.config().vocab));
    const std::vector<float>& l = seq.append({next});
    all.insert(all.end(), l.begin(), l.end());
  }
  if (!far_dir.empty()) {
    EXPECT_EQ(seq.kv().config().num_blocks, kRamTokens / 16) << "the RAM pool never grows";
    if (far_blocks) *far_blocks = seq.far()->stats().blocks;
    // A far block cannot be rewritten: truncating into one is refused, changing nothing.
    Status t = seq.truncate(100);
    EXPECT_FALSE(t.ok());
    EXPECT_EQ(seq.num_tokens(), kDepth + kPrompt + kGen);
  }
  return all;
}

class FarSequenceTest : public ::testing::TestWithParam<KvPrecision> {};

TEST_P(FarSequenceTest, LogitsBitIdenticalToAllInRam) {
  auto m = Model::load(test::model_path("synth-tiny-f16.gguf"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  const std::string dir = test::make_temp_dir("far_seq");
  const std::vector<float> ram = run(**m, pool, GetParam(), "");
  uint64_t far_blocks = 0;
  const std::vector<float> far = run(**m, pool, GetParam(), dir, &far_blocks);
  // Most of the context lives on disk.
  EXPECT_GT(far_blocks, static_cast<uint64_t>((kDepth + kPrompt) / 16 - kRamTokens / 16));
  ASSERT_EQ(ram.size(), far.size());
  EXPECT_EQ(std::memcmp(ram.data(), far.data(), ram.size() * sizeof(float)), 0);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, FarSequenceTest,
                         ::testing::Values(test::uniform_kv(KvType::kF16), test::uniform_kv(KvType::kInt8), test::uniform_kv(KvType::kFp8),
                                           test::windowed_kv(64, KvType::kInt4)),
                         [](const auto& info) { return test::kv_param_name(info.param); });

}  // namespace
}  // namespace hz
