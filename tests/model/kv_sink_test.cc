// Sink tokens (--kv-sink-tokens): with a hot window over a cold type, the blocks holding the first
// positions stay in the hot type for every later query. Their K/V are bit-identical to an all-f16
// run's, they keep their staging copy while the sequence lives (later blocks are freed), attention
// reads them in the hot form, and the far tier never takes them (a sequence longer than its RAM
// pool gives the same logits with its other old blocks on disk).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_read_table.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"

namespace hz {
namespace {

constexpr int32_t kTokens = 120;

std::vector<int32_t> tokens(int32_t vocab) {
  std::vector<int32_t> t(kTokens);
  for (int32_t i = 0; i < kTokens; ++i) t[i] = 1 + (i * 37 + 11) % (vocab - 1);
  return t;
}

class KvSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::load(test::model_path("stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(*m);
  }
  std::unique_ptr<SingleSequence> run(const KvPrecision& p, int32_t ram_tokens = 0, const std::string& far_dir = "") {
    SingleSequenceOptions o;
    o.max_tokens = 256;
    o.kv_precision = p;
    o.ram_tokens = ram_tokens;
    o.prefill_chunk = 16;
    auto s = std::make_unique<SingleSequence>(*model_, pool_, o);
    if (!far_dir.empty()) {
      EXPECT_TRUE(s->enable_far(far_dir, 8u << 20).ok());
    }
    logits_ = s->append(tokens(model_->config().vocab));
    return s;
  }
  static KvPrecision sinks(uint64_t n) {
    KvPrecision p{KvType::kF16, 32, KvType::kInt2};
    p.sink_tokens = n;
    return p;
  }
  std::unique_ptr<Model> model_;
  ThreadPool pool_{2};
  std::vector<float> logits_;
};

TEST_F(KvSinkTest, SinkBlocksStayBitIdenticalToAnExactRun) {
  auto exact = run(KvPrecision{KvType::kF16, 0, KvType::kF16});
  auto sunk = run(sinks(4));
  auto plain = run(sinks(0));
  const KvCache& e = exact->kv();
  const KvCache& s = sunk->kv();
  const KvCacheConfig& c = s.config();
  // A fresh pool hands out blocks 0, 1, 2, ... in order: block 0 holds positions 0-15.
  EXPECT_EQ(s.sink_blocks(), 1);
  EXPECT_TRUE(s.has_staging(0));
  EXPECT_FALSE(s.has_staging(1));             // an old block past the window: encoded, staging freed
  EXPECT_FALSE(plain->kv().has_staging(0));   // without sinks block 0 goes cold like the rest
  const uint64_t plane = static_cast<uint64_t>(c.num_kv_heads) * c.block_tokens * c.head_dim * 2;  // f16
  for (int32_t l = 0; l < c.num_layers; ++l) {
    for (int32_t st = 0; st < 2; ++st) {
      ASSERT_NE(s.exact_plane(0, l, st), nullptr);
      EXPECT_EQ(0, std::memcmp(s.exact_plane(0, l, st), e.exact_plane(0, l, st), plane)) << "layer " << l << " stream " << st;
    }
  }
  // The last query reads block 0 hot (f16, its staging copy) and block 1 cold (int2).
  std::vector<BlockRef> table;
  for (int32_t b = 0; b < s.blocks_for(kTokens); ++b) table.push_back(BlockRef::pool(b));
  EXPECT_EQ(s.read_form(kTokens - 1, 0), KvRead::kHot);
  EXPECT_EQ(s.read_form(kTokens - 1, 1), KvRead::kCold);
  KvReadTable t;
  t.reset(s, table.data(), kTokens - 1, kTokens);
  t.bind_layer(0);
  EXPECT_EQ(t.block(kTokens - 1, 0).k_codec, kernels::KvCodec::kF16);
  EXPECT_EQ(t.block(kTokens - 1, 0).k_elems, s.exact_plane(0, 0, 0));
  EXPECT_EQ(t.block(kTokens - 1, 1).k_codec, kernels::KvCodec::kInt2);
  // A sink count is whole blocks: 1 and 16 keep the same block, so the same logits.
  run(sinks(1));
  const std::vector<float> one = logits_;
  run(sinks(16));
  EXPECT_EQ(one, logits_);
  run(sinks(17));  // two blocks
  EXPECT_NE(one, logits_);
}

TEST_F(KvSinkTest, FarTierNeverTakesSinkBlocks) {
  auto ram = run(sinks(4));
  const std::vector<float> want = logits_;
  const std::string dir = test::make_temp_dir("kv_sink_far");
  auto far = run(sinks(4), /*ram_tokens=*/80, dir);  // 5 RAM blocks for 8 blocks of positions
  ASSERT_NE(far->far(), nullptr);
  EXPECT_GT(far->far()->num_used(), 0);
  EXPECT_EQ(want, logits_);            // far blocks read cold exactly as before
  EXPECT_TRUE(far->kv().has_staging(0));  // the sink block stayed in RAM, hot
}

}  // namespace
}  // namespace hz
