// Flash-decoding invariance: attention output bits do not depend on the thread count or on whether
// key ranges are split across threads (the merge tree is fixed by positions). Checked on the
// AttentionRunner directly (GQA groups, sliding windows, several KV types) and end to end: decode
// at depth > 2,000 on synth-tiny-f16 gives bit-identical logits with 1, 2 and 3 threads, split or
// not, for f16 and int8 KV (and a hot window).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/attention.h"
#include "model/attention_runner.h"
#include "model/model.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"

namespace hz {
namespace {

constexpr int32_t kHeads = 6, kKvHeads = 2, kHd = 32;

// A one-layer cache of `n` random positions, committed as a prefill leaves it.
std::unique_ptr<KvCache> random_cache(KvPrecision p, int32_t n, std::vector<BlockRef>* table) {
  KvCacheConfig c;
  c.num_layers = 1;
  c.num_kv_heads = kKvHeads;
  c.head_dim = kHd;
  c.block_tokens = 16;
  c.num_blocks = (n + 15) / 16;
  c.precision = p;
  auto kv = std::make_unique<KvCache>(c);
  EXPECT_TRUE(kv->pool().allocate_n(c.num_blocks, table));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int32_t pos = 0; pos < n; ++pos) {
    for (int32_t h = 0; h < kKvHeads; ++h) {
      for (int32_t st = 0; st < 2; ++st) {
        uint8_t* row = kv->write_row((*table)[pos / 16], 0, st, h, pos % 16);
        for (int32_t i = 0; i < kHd; ++i) reinterpret_cast<uint16_t*>(row)[i] = f32_to_f16(nd(rng));
      }
    }
  }
  kv->seal_layer(0, table->data(), 0, n);
  kv->commit(table->data(), n - 3);  // the last queries' blocks stay staged: on-the-fly encodes too
  return kv;
}

TEST(AttentionRunnerTest, SplitAndThreadCountDoNotChangeBits) {
  const int32_t n = 1700;
  for (KvPrecision p : {KvPrecision{KvType::kF16, 0, KvType::kF16}, KvPrecision{KvType::kInt8, 0, KvType::kInt8},
                        KvPrecision{KvType::kF16, 64, KvType::kInt4}, KvPrecision{KvType::kFp8, 0, KvType::kFp8}}) {
    std::vector<BlockRef> table;
    auto kv = random_cache(p, n, &table);
    // Three query tokens at the end (as a short prefill chunk would have), for two windows.
    KvReadTable read;
    std::vector<AttnQueryRow> rows = {{&read, n - 3}, {&read, n - 2}, {&read, n - 1}};
    std::mt19937 rng(4);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> q(rows.size() * kHeads * kHd);
    for (auto& x : q) x = nd(rng);
    for (int64_t window : {int64_t{0}, int64_t{700}}) {
      read.reset(*kv, table.data(), n - 3, n, window);
      read.bind_layer(0);
      AttnJob job;
      job.head_dim = kHd;
      job.num_heads = kHeads;
      job.num_kv_heads = kKvHeads;
      job.q_scale = 0.3f;
      job.window = window;
      job.q = q.data();
      job.rows = rows.data();
      job.num_tokens = static_cast<int64_t>(rows.size());
      // Reference: attend_group per (token, kv head) on one thread.
      std::vector<float> want(q.size());
      AttnScratch sc;
      std::vector<float> qs(3 * kHd);
      for (size_t t = 0; t < rows.size(); ++t) {
        for (int32_t g = 0; g < kKvHeads; ++g) {
          for (int32_t i = 0; i < 3 * kHd; ++i) qs[i] = q[(t * kHeads + g * 3) * kHd + i] * job.q_scale;
          attend_group(*kv, table.data(), 0, g, qs.data(), 3, rows[t].pos, &want[(t * kHeads + g * 3) * kHd], &sc,
                       window);
        }
      }
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (AttnSplit s : {AttnSplit::kNever, AttnSplit::kAlways, AttnSplit::kAuto}) {
          AttentionRunner runner;
          runner.set_split(s);
          std::vector<float> out(q.size(), -1.0f);
          job.out = out.data();
          runner.run(job, pool);
          if (s == AttnSplit::kAlways) {
            EXPECT_TRUE(runner.last_split());
          }
          EXPECT_EQ(0, std::memcmp(out.data(), want.data(), sizeof(float) * out.size()))
              << "threads " << threads << " split " << static_cast<int>(s) << " window " << window << " type "
              << static_cast<int>(p.hot);
        }
      }
    }
  }
}

// Decoded logits after a synthetic context of `depth` positions, then a 5-token prompt chunk and
// three single-token steps.
std::vector<float> deep_decode(Model& m, int threads, AttnSplit split, KvPrecision p, int64_t depth) {
  ThreadPool pool(threads);
  m.set_attention_split(split);
  SingleSequenceOptions o;
  o.max_tokens = static_cast<int32_t>(depth + 64);
  o.kv_precision = p;
  SingleSequence seq(m, pool, o);
  EXPECT_TRUE(seq.fill_synthetic(depth, 7).ok());
  std::vector<float> out = seq.append({5, 6, 7, 8, 9});
  for (int32_t tok : {10, 11, 12}) {
    const auto& l = seq.append({tok});
    out.insert(out.end(), l.begin(), l.end());
  }
  m.set_attention_split(AttnSplit::kAuto);
  return out;
}

TEST(AttentionSplitModelTest, DeepDecodeIsBitIdenticalAcrossThreadsAndSplits) {
  auto m = Model::load(test::model_path("synth-tiny-f16.gguf"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  const int64_t depth = 2100;
  std::vector<std::vector<float>> per_type;
  for (KvPrecision p : {KvPrecision{KvType::kF16, 0, KvType::kF16}, KvPrecision{KvType::kInt8, 0, KvType::kInt8},
                        KvPrecision{KvType::kF16, 64, KvType::kInt8}}) {
    const std::vector<float> base = deep_decode(**m, 1, AttnSplit::kNever, p, depth);
    for (int threads : {1, 2, 3}) {
      for (AttnSplit s : {AttnSplit::kNever, AttnSplit::kAlways, AttnSplit::kAuto}) {
        if (threads == 1 && s == AttnSplit::kNever) continue;
        const std::vector<float> got = deep_decode(**m, threads, s, p, depth);
        ASSERT_EQ(got.size(), base.size());
        EXPECT_EQ(0, std::memcmp(got.data(), base.data(), sizeof(float) * base.size()))
            << "threads " << threads << " split " << static_cast<int>(s) << " type " << static_cast<int>(p.hot);
      }
    }
    per_type.push_back(base);
  }
  // The types are really in use, and the deep context matters (logits differ between types).
  EXPECT_NE(0, std::memcmp(per_type[0].data(), per_type[1].data(), sizeof(float) * per_type[0].size()));
}

}  // namespace
}  // namespace hz
