// Mixture of experts: tiny random MoE models (written with GgufWriter) against a plain-loop dense
// reference, routing per token and per layer, one batch per expert, batch/chunk invariance, and
// load errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "base/thread_pool.h"
#include "model/model.h"
#include "model/moe.h"
#include "runtime/single_sequence.h"
#include "support/test_support.h"
#include "support/tiny_model.h"

namespace hz {
namespace {

using test::TinyModel;
using test::TinyModelSpec;

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

std::string write_model(const TinyModel& m, const std::string& name) {
  static const std::string dir = test::make_temp_dir("moe_test");
  std::string path = dir + "/" + name + ".gguf";
  EXPECT_TRUE(m.write(path));
  return path;
}

std::unique_ptr<Model> load_or_die(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<float> engine_logits(Model& m, ThreadPool& pool, const std::vector<int32_t>& tokens, int chunk) {
  SingleSequence seq(m, pool, {.max_tokens = 256, .kv_dtype = DType::kF32});
  std::vector<float> out;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    std::vector<int32_t> part(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + chunk));
    const auto& l = seq.append(part, /*all_logits=*/true);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

TinyModelSpec mixtral_spec() {
  TinyModelSpec s;
  s.arch = "llama";
  s.layers = 3;
  s.experts = 6;
  s.experts_used = 2;
  s.seed = 7;
  return s;
}
TinyModelSpec qwen2moe_spec() {
  TinyModelSpec s;
  s.arch = "qwen2moe";
  s.layers = 2;
  s.experts = 5;
  s.experts_used = 2;
  s.expert_ffn = 24;
  s.shared_ffn = 40;
  s.qkv_bias = true;
  s.seed = 11;
  return s;
}
TinyModelSpec qwen3moe_spec() {
  TinyModelSpec s;
  s.arch = "qwen3moe";
  s.layers = 2;
  s.experts = 8;
  s.experts_used = 3;
  s.expert_ffn = 16;
  s.qk_norm = true;
  s.seed = 13;
  return s;
}

TinyModelSpec spec_named(const std::string& name) {
  if (name == "qwen2moe") return qwen2moe_spec();
  if (name == "qwen3moe") return qwen3moe_spec();
  return mixtral_spec();
}

class MoeReferenceTest : public ::testing::TestWithParam<std::string> {};

// The engine's logits at every position match the reference, and the reference's routing really
// varies: different expert sets across tokens within a layer, and across layers for one token.
TEST_P(MoeReferenceTest, MatchesDenseReference) {
  const std::string& name = GetParam();
  const TinyModelSpec spec = spec_named(name);
  TinyModel tm = TinyModel::random(spec);
  auto model = load_or_die(write_model(tm, name));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().num_experts, spec.experts);
  EXPECT_EQ(model->config().expert_weights_norm, spec.arch != "qwen2moe");
  ThreadPool pool(2);
  const auto tokens = random_tokens(24, spec.vocab, 3);
  TinyModel::Trace trace;
  const std::vector<float> ref = tm.reference_logits(tokens, &trace);
  // A near-tie at the top-k boundary would make the comparison meaningless (float vs double).
  ASSERT_GT(trace.min_route_margin, 1e-5);
  for (int32_t l = 0; l < spec.layers; ++l) {
    std::set<std::vector<int32_t>> sets;
    for (std::vector<int32_t> ids : trace.experts[l]) {
      std::sort(ids.begin(), ids.end());
      sets.insert(ids);
    }
    EXPECT_GE(sets.size(), 3u) << "layer " << l << ": routing barely varies across tokens";
  }
  int tokens_routed_differently_across_layers = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::set<int32_t> a(trace.experts[0][t].begin(), trace.experts[0][t].end());
    std::set<int32_t> b(trace.experts[1][t].begin(), trace.experts[1][t].end());
    tokens_routed_differently_across_layers += a != b;
  }
  EXPECT_GE(tokens_routed_differently_across_layers, 5);

  const std::vector<float> got = engine_logits(*model, pool, tokens, 1000);
  ASSERT_EQ(got.size(), ref.size());
  float max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(got[i] - ref[i]));
  EXPECT_LT(max_diff, 2e-4f);
  RecordProperty("max_abs_diff", std::to_string(max_diff));
}

// Prefill in chunks of 1 (decode path), 5, or whole: identical bits.
TEST_P(MoeReferenceTest, ChunkAndThreadInvariant) {
  const std::string& name = GetParam();
  const TinyModelSpec spec = spec_named(name);
  TinyModel tm = TinyModel::random(spec);
  auto model = load_or_die(write_model(tm, name + "_chunks"));
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2), three(3);
  const auto tokens = random_tokens(40, spec.vocab, 5);
  const std::vector<float> whole = engine_logits(*model, pool, tokens, 1000);
  for (int chunk : {1, 5, 16}) {
    std::vector<float> c = engine_logits(*model, chunk == 5 ? three : pool, tokens, chunk);
    ASSERT_EQ(c.size(), whole.size());
    EXPECT_EQ(0, std::memcmp(c.data(), whole.data(), c.size() * sizeof(float))) << "chunk " << chunk;
  }
}

// Two sequences in one forward call share expert batches; each must get the bits it gets alone.
TEST_P(MoeReferenceTest, BatchedWithOthersEqualsAlone) {
  const std::string& name = GetParam();
  const TinyModelSpec spec = spec_named(name);
  TinyModel tm = TinyModel::random(spec);
  auto model = load_or_die(write_model(tm, name + "_batch"));
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  const int vocab = spec.vocab;
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(17, vocab, 21), random_tokens(9, vocab, 22)};
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) alone.push_back(engine_logits(*model, pool, p, 1000));

  const ModelConfig& c = model->config();
  KvCache kv(KvCacheConfig{c.num_layers, c.num_kv_heads, c.head_dim, 16, DType::kF32, 16});
  std::vector<std::vector<BlockRef>> tables(2);
  for (auto& t : tables) kv.pool().allocate_n(4, &t);
  std::vector<SeqSlice> batch(2);
  for (int s = 0; s < 2; ++s) {
    batch[s].tokens = prompts[s].data();
    batch[s].num_tokens = static_cast<int32_t>(prompts[s].size());
    batch[s].block_table = tables[s].data();
    batch[s].all_logits = true;
  }
  std::vector<float> logits;
  model->forward(batch, kv, pool, &logits);
  ASSERT_EQ(logits.size(), (prompts[0].size() + prompts[1].size()) * vocab);
  EXPECT_EQ(0, std::memcmp(logits.data(), alone[0].data(), alone[0].size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(logits.data() + alone[0].size(), alone[1].data(), alone[1].size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeReferenceTest,
                         ::testing::Values("mixtral", "qwen2moe", "qwen3moe"),
                         [](const auto& info) { return info.param; });

TEST(MoeRouteTest, SoftmaxTopKRenormalised) {
  const float logits[4] = {0.0f, 2.0f, 1.0f, -1.0f};
  int32_t ids[2];
  float w[2], probs[4];
  route_token(logits, 4, 2, /*normalize=*/true, ids, w, probs);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  // e^2 / (e^2 + e^1) and e^1 / (e^2 + e^1): the other experts' mass drops out.
  EXPECT_NEAR(w[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(w[1], std::exp(1.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  route_token(logits, 4, 2, /*normalize=*/false, ids, w, probs);
  const double z = std::exp(0.0) + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(w[1], std::exp(1.0) / z, 1e-6);
}

TEST(MoeRouteTest, TiesGoToLowerExpertId) {
  const float logits[5] = {1.0f, 3.0f, 1.0f, 3.0f, 1.0f};
  int32_t ids[3];
  float w[3], probs[5];
  route_token(logits, 5, 3, true, ids, w, probs);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 0);
}

// Prefill runs each routed expert once over all its tokens: the expert matmuls see token counts
// that add up to num_tokens * k, in at most num_experts calls per matrix.
TEST(MoeBlockTest, OneBatchPerExpert) {
  TinyModelSpec spec = mixtral_spec();
  TinyModel tm = TinyModel::random(spec);
  auto model = load_or_die(write_model(tm, "batching"));
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  const LayerWeights& L = model->weights().layers[0];
  const int64_t n = 32;
  std::vector<float> xn(n * c.hidden);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (auto& v : xn) v = nd(rng);
  std::vector<float> out(n * c.hidden);
  int64_t gate_calls = 0, gate_tokens = 0;
  std::set<const uint8_t*> gate_experts;
  MatmulFn mm = [&](const Matrix& w, const float* x, int64_t num_tokens, float* y) {
    if (w.name == L.gate_exps.m.name) {
      ++gate_calls;
      gate_tokens += num_tokens;
      EXPECT_TRUE(gate_experts.insert(w.data).second) << "expert run twice in one step";
    }
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t r = 0; r < w.rows; ++r) {
        const float* row = reinterpret_cast<const float*>(w.data + r * w.row_bytes);
        float s = 0;
        for (int64_t i = 0; i < w.cols; ++i) s += row[i] * x[t * w.cols + i];
        y[t * w.rows + r] = s;
      }
    }
  };
  MoeBlock moe;
  moe.forward(c, L, xn.data(), n, out.data(), mm);
  EXPECT_EQ(gate_tokens, n * c.num_experts_used);
  EXPECT_LE(gate_calls, c.num_experts);
  EXPECT_GE(gate_calls, 3);  // 32 random rows spread over several experts
  EXPECT_EQ(moe.last_expert_ids().size(), static_cast<size_t>(n * c.num_experts_used));
}

// Bad MoE metadata or tensors fail to load with an error naming the key or tensor.
TEST(MoeLoadTest, BadMetadataAndTensorsAreErrors) {
  {
    TinyModel tm = TinyModel::random(mixtral_spec());
    tm.spec.experts_used = 9;  // more than expert_count
    auto m = Model::load(write_model(tm, "bad_used"));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("expert_used_count"), std::string::npos) << m.status().message();
  }
  {
    TinyModel tm = TinyModel::random(mixtral_spec());
    tm.w.erase("blk.1.ffn_up_exps.weight");
    tm.dims.erase("blk.1.ffn_up_exps.weight");
    auto m = Model::load(write_model(tm, "missing_exps"));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("blk.1.ffn_up_exps.weight"), std::string::npos) << m.status().message();
  }
  {
    TinyModel tm = TinyModel::random(mixtral_spec());
    // 3 experts, 6 declared
    tm.dims["blk.0.ffn_down_exps.weight"] = {static_cast<uint64_t>(tm.spec.ffn), static_cast<uint64_t>(tm.spec.hidden), 3};
    tm.w["blk.0.ffn_down_exps.weight"].resize(tm.spec.ffn * tm.spec.hidden * 3);
    auto m = Model::load(write_model(tm, "short_exps"));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("blk.0.ffn_down_exps.weight"), std::string::npos) << m.status().message();
  }
  {
    TinyModel tm = TinyModel::random(qwen2moe_spec());
    tm.w.erase("blk.0.ffn_gate_inp_shexp.weight");
    tm.dims.erase("blk.0.ffn_gate_inp_shexp.weight");
    auto m = Model::load(write_model(tm, "missing_shexp"));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("ffn_gate_inp_shexp"), std::string::npos) << m.status().message();
  }
  {
    TinyModel tm = TinyModel::random(TinyModelSpec{.arch = "qwen2moe"});  // dense tensors, no expert_count
    auto m = Model::load(write_model(tm, "qwen2moe_dense"));
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("expert_count"), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace hz
