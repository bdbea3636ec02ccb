// Sliding-window attention (Mistral's `attention.sliding_window`): attend() over the last `window`
// keys equals a softmax over exactly those keys, the config reads the key, and window 0 is full
// causal attention.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "format/gguf.h"
#include "kv/kv_cache.h"
#include "model/attention.h"
#include "model/model_config.h"
#include "support/test_support.h"
#include "support/tiny_model.h"

namespace hz {
namespace {

constexpr int32_t kHeadDim = 8;

struct Filled {
  std::unique_ptr<KvCache> kv;
  std::vector<BlockRef> table;
  std::vector<std::vector<float>> k, v;  // [pos][head_dim]
};

Filled fill(int64_t num_pos, uint32_t seed) {
  Filled f;
  f.kv = std::make_unique<KvCache>(KvCacheConfig{1, 1, kHeadDim, 16, DType::kF32, 64});
  f.kv->pool().allocate_n(f.kv->blocks_for(num_pos), &f.table);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  for (int64_t p = 0; p < num_pos; ++p) {
    std::vector<float> k(kHeadDim), v(kHeadDim);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    const BlockRef block = f.table[p / 16];
    const int32_t slot = static_cast<int32_t>(p % 16);
    std::memcpy(f.kv->write_row(block, 0, 0, 0, slot), k.data(), sizeof(float) * kHeadDim);
    std::memcpy(f.kv->write_row(block, 0, 1, 0, slot), v.data(), sizeof(float) * kHeadDim);
    f.k.push_back(k);
    f.v.push_back(v);
  }
  return f;
}

std::vector<double> reference(const Filled& f, const std::vector<float>& q, int64_t first, int64_t pos) {
  std::vector<double> s;
  double mx = -1e300;
  for (int64_t j = first; j <= pos; ++j) {
    double d = 0;
    for (int i = 0; i < kHeadDim; ++i) d += q[i] * f.k[j][i];
    s.push_back(d);
    mx = std::max(mx, d);
  }
  double sum = 0;
  for (auto& x : s) sum += (x = std::exp(x - mx));
  std::vector<double> out(kHeadDim, 0.0);
  for (int64_t j = first; j <= pos; ++j) {
    for (int i = 0; i < kHeadDim; ++i) out[i] += s[j - first] / sum * f.v[j][i];
  }
  return out;
}

TEST(SlidingWindowTest, AttendsOnlyTheLastWindowKeys) {
  const int64_t n = 600;  // spans several 256-key segments
  Filled f = fill(n, 3);
  std::vector<float> q(kHeadDim);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (auto& x : q) x = nd(rng);
  std::vector<float> out(kHeadDim);
  AttnScratch scratch;
  for (int64_t window : {1, 5, 16, 100, 300, 4096}) {
    for (int64_t pos : {0, 3, 17, 255, 256, 299, 599}) {
      attend(*f.kv, f.table.data(), 0, 0, q.data(), pos, out.data(), &scratch, window);
      const auto want = reference(f, q, std::max<int64_t>(0, pos - window + 1), pos);
      for (int i = 0; i < kHeadDim; ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << "window " << window << " pos " << pos;
    }
  }
  // Window 0 is full causal attention, and the window really excludes keys.
  attend(*f.kv, f.table.data(), 0, 0, q.data(), 599, out.data(), &scratch, 0);
  const auto full = reference(f, q, 0, 599);
  for (int i = 0; i < kHeadDim; ++i) EXPECT_NEAR(out[i], full[i], 1e-5);
  attend(*f.kv, f.table.data(), 0, 0, q.data(), 599, out.data(), &scratch, 5);
  double d = 0;
  for (int i = 0; i < kHeadDim; ++i) d += std::fabs(out[i] - full[i]);
  EXPECT_GT(d, 1e-2);
}

TEST(SlidingWindowTest, ConfigReadsTheMetadataKey) {
  const std::string dir = test::make_temp_dir("sliding_window_test");
  test::TinyModel m = test::TinyModel::random({});
  ASSERT_TRUE(m.write(dir + "/swa.gguf", [](GgufWriter& g) { g.set_u32("llama.attention.sliding_window", 4096); }));
  auto f = GgufFile::open(dir + "/swa.gguf");
  ASSERT_TRUE(f.ok());
  auto c = ModelConfig::from_gguf(*f);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sliding_window, 4096);
}

}  // namespace
}  // namespace hz
