// Fidelity of compact KV types on a real trained model (stories260K) over the shared corpus at
// --ctx 256, llama.cpp's perplexity method: perplexity with f16 KV, and the KL divergence of every
// scored next-token distribution against an f32-KV base, per type, within bounds set from
// measurement (see kBounds); plus teacher-forced top-5 probabilities within 0.05 of llama.cpp's
// golden file with int8 KV.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/perplexity.h"
#include "runtime/single_sequence.h"
#include "support/golden.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace hz {
namespace {

class KvFidelityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = Model::load(test::model_path("stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value().release();
    auto tok = Tokenizer::from_gguf(model_->file());
    ASSERT_TRUE(tok.ok());
    std::ifstream in(test::testdata_path("corpus/stories260K-samples.txt"));
    std::stringstream ss;
    ss << in.rdbuf();
    tokens_ = new std::vector<int32_t>((*tok)->encode(ss.str(), true, false));
    bos_ = (*tok)->bos_id();
    pool_ = new ThreadPool(2);
    base_ = new PerplexityResult(run({KvType::kF32, 0, KvType::kF32}));
  }
  static void TearDownTestSuite() {
    delete base_;
    delete pool_;
    delete tokens_;
    delete model_;
  }
  static PerplexityResult run(KvPrecision p, int32_t block_tokens = 16) {
    PerplexityOptions o;
    o.ctx = 256;
    o.block_tokens = block_tokens;
    o.kv = p;
    o.bos_id = bos_;
    o.keep_logprobs = true;
    auto r = compute_perplexity(*model_, *pool_, *tokens_, o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r).value() : PerplexityResult{};
  }
  static inline Model* model_ = nullptr;
  static inline std::vector<int32_t>* tokens_ = nullptr;
  static inline int32_t bos_ = -1;
  static inline ThreadPool* pool_ = nullptr;
  static inline PerplexityResult* base_ = nullptr;
};

TEST_F(KvFidelityTest, PerplexityWithF16KvMatchesLlamaCpp) {
  PerplexityResult f16 = run({KvType::kF16, 0, KvType::kF16});
  std::printf("ppl f32 KV %.4f, f16 KV %.4f over %lld tokens in %d windows\n", base_->ppl, f16.ppl,
              static_cast<long long>(f16.num_scored), f16.num_windows);
  // llama.cpp's llama-perplexity on the same file and window measures 3.598 with f16 KV.
  EXPECT_NEAR(f16.ppl, 3.598, 0.01);
  KlStats k = kl_divergence(base_->logprobs, f16.logprobs, base_->vocab);
  EXPECT_LT(k.mean, 1e-5);  // f16 vs f32 KV: rounding only
}

struct Bound {
  const char* name;
  KvPrecision p;
  double mean_kld;
};

// Measured on this corpus at ctx 256 (9,017 scored tokens in 71 windows) vs the f32-KV base:
//   type        ppl     mean KLD   median     p99       top-1 changed
//   f16         3.5983  <1e-5      (llama.cpp: ppl 3.598 with f16 KV)
//   int8        3.5999  3.24e-4    5.7e-5     4.0e-3    0.68%
//   fp8         3.6087  4.19e-3    7.9e-4     5.4e-2    2.65%
//   int4        4.1724  1.40e-1    2.9e-2     1.74      15.9%
//   int4+hot64  3.6041  1.84e-3    1.2e-4     3.3e-2    1.33%   (f16 for the newest 64 tokens)
// Each bound is about 1.5x its measurement: the arithmetic is deterministic (same bits on every
// thread count and ISA), so the margin only absorbs deliberate numeric changes, while a real
// regression (a wrong scale, a group spanning heads, a block read encoded before its last query)
// moves the mean by far more. int4 is poor here because stories260K's head dim is 8: one scale per
// 8 values at 16 levels; the hot window recovers most of it because the model attends mostly to
// recent tokens. The ordering checks below make sure the meter itself discriminates.
const Bound kBounds[] = {
    {"int8", {KvType::kInt8, 0, KvType::kInt8}, 5e-4},
    {"fp8", {KvType::kFp8, 0, KvType::kFp8}, 6.5e-3},
    {"int4", {KvType::kInt4, 0, KvType::kInt4}, 0.21},
    {"int4+hot64", {KvType::kF16, 64, KvType::kInt4}, 2.8e-3},
};

TEST_F(KvFidelityTest, MeanKlDivergenceAgainstF32BaseWithinMeasuredBounds) {
  std::vector<KlStats> got;
  for (const Bound& b : kBounds) {
    PerplexityResult r = run(b.p);
    KlStats k = kl_divergence(base_->logprobs, r.logprobs, base_->vocab);
    std::printf("%-11s ppl %.4f  KLD mean %.6f median %.6f p99 %.6f  top-1 changed %.2f%%\n", b.name, r.ppl, k.mean,
                k.median, k.p99, 100 * k.top_token_change_rate);
    EXPECT_LE(k.mean, b.mean_kld) << b.name;
    EXPECT_EQ(k.n, base_->num_scored);
    got.push_back(k);
  }
  EXPECT_LT(got[0].mean, got[1].mean);  // int8 < fp8
  EXPECT_LT(got[0].mean, got[2].mean);  // int8 < int4
  EXPECT_LT(got[3].mean, got[2].mean);  // a hot window helps int4
}

// Hadamard rotation of K and V (kv/kv_rotation.h), measured the same way:
//   type             ppl     mean KLD   p99       top-1 changed   (rotation off: see above)
//   f32 rotated      -       <1e-6                                (rounding of the rotation only)
//   int8 rotated     3.5980  1.56e-4    1.8e-3    0.47%
//   fp8 rotated      3.6252  7.42e-3    9.5e-2    3.93%           (worse: fp8 is not rotated by default)
//   int4 rotated     3.8112  6.12e-2    0.82      10.0%
//   int4+hot32 rot.  3.6111  3.78e-3    5.5e-2    3.04%           (off: 1.18e-2)
TEST_F(KvFidelityTest, RotationLowersTheDivergenceOfIntegerTypes) {
  KvPrecision f32{KvType::kF32, 0, KvType::kF32};
  f32.rotated = true;
  PerplexityResult exact = run(f32);
  EXPECT_LT(kl_divergence(base_->logprobs, exact.logprobs, base_->vocab).mean, 1e-6);  // orthogonal: scores kept
  struct Case {
    const char* name;
    KvPrecision p;
    double bound;
  };
  const Case cases[] = {{"int8", {KvType::kInt8, 0, KvType::kInt8}, 2.4e-4},
                        {"int4", {KvType::kInt4, 0, KvType::kInt4}, 0.092},
                        {"int4+hot32", {KvType::kF16, 32, KvType::kInt4}, 5.7e-3}};
  for (const Case& c : cases) {
    KvPrecision plain = c.p, rotated = c.p;
    rotated.rotated = true;
    const KlStats off = kl_divergence(base_->logprobs, run(plain).logprobs, base_->vocab);
    const KlStats on = kl_divergence(base_->logprobs, run(rotated).logprobs, base_->vocab);
    std::printf("%-11s KLD mean rotation off %.6f on %.6f\n", c.name, off.mean, on.mean);
    EXPECT_LE(on.mean, c.bound) << c.name;
    EXPECT_LT(on.mean, 0.75 * off.mean) << c.name;
  }
}

// int3 / int2 cold under a 32-token f16 window (asymmetric, per channel over a block; not rotated),
// measured the same way (cold bits per value with scales: int4 6, int3 4, int2 3):
//   type                      ppl     mean KLD   p99      top-1 changed
//   int4+hot32 (rotated)      3.6111  3.78e-3    5.5e-2   3.04%
//   int3+hot32                -       2.78e-3
//   int2+hot32                -       1.57e-2
//   int2+hot32+sinks 4        -       1.45e-2             (the first block kept f16)
// Sinks help int2 by 8%: the bound below lies between the two, so it fails if sinks stop working
// (the arithmetic is deterministic, see above).
TEST_F(KvFidelityTest, LowBitColdTypesAndSinkTokens) {
  KvPrecision int3{KvType::kF16, 32, KvType::kInt3};
  KvPrecision int2{KvType::kF16, 32, KvType::kInt2};
  KvPrecision int2_sinks = int2;
  int2_sinks.sink_tokens = 4;
  const KlStats k3 = kl_divergence(base_->logprobs, run(int3).logprobs, base_->vocab);
  const KlStats k2 = kl_divergence(base_->logprobs, run(int2).logprobs, base_->vocab);
  const KlStats k2s = kl_divergence(base_->logprobs, run(int2_sinks).logprobs, base_->vocab);
  std::printf("KLD mean int3+hot32 %.6f, int2+hot32 %.6f, with 4 sink tokens %.6f\n", k3.mean, k2.mean, k2s.mean);
  EXPECT_LE(k3.mean, 4.2e-3);
  EXPECT_LE(k2.mean, 2.4e-2);
  EXPECT_LT(k3.mean, k2.mean);
  EXPECT_LE(k2s.mean, 1.51e-2);
  EXPECT_GT(k2.mean, 1.51e-2);  // the same bound, missed without sinks
}

// Keys and values in different types (cold, under a 32-token f16 window with 4 sink tokens),
// measured the same way; cold bytes per token against f16 hot 32 + int4's 240 (6 bits per value):
//   cold types            block  bits/value  cold B/tok   mean KLD   p99      top-1 changed
//   int2                  16     3.0         120 (50%)    1.45e-2    0.21     4.94%
//   K int3 / V int2       16     3.5         140 (58%)    4.21e-3    6.6e-2   2.77%
//   K int3 / V int2       32     3.0         120 (50%)    4.96e-3    8.3e-2   2.88%
//   K int2 / V int3       16     3.5         140 (58%)    (the check below: keys need the bits)
// Keys carry most of int2's loss: two bits per key channel flatten the scores, while values are
// averaged by them. With 32-token blocks a scale and an offset byte per channel cost half as much
// per value, so K int3 / V int2 fits in int2's bytes.
TEST_F(KvFidelityTest, KeysAndValuesApartMeetTheTwoBitTarget) {
  auto split = [](KvType k, KvType v) {
    KvPrecision p{KvType::kF16, 32, k};
    p.cold_v = v;
    p.sink_tokens = 4;
    return p;
  };
  const KlStats k3v2 = kl_divergence(base_->logprobs, run(split(KvType::kInt3, KvType::kInt2)).logprobs, base_->vocab);
  const KlStats k2v3 = kl_divergence(base_->logprobs, run(split(KvType::kInt2, KvType::kInt3)).logprobs, base_->vocab);
  const KlStats k3v2_32 = kl_divergence(base_->logprobs, run(split(KvType::kInt3, KvType::kInt2), 32).logprobs, base_->vocab);
  std::printf("KLD mean hot32+sinks4: K int3 / V int2 %.6f (block 32: %.6f), K int2 / V int3 %.6f\n", k3v2.mean,
              k3v2_32.mean, k2v3.mean);
  EXPECT_LE(k3v2.mean, 6.3e-3);
  EXPECT_LE(k3v2_32.mean, 7.5e-3);
  EXPECT_GT(k2v3.mean, 2 * k3v2.mean) << "the bits belong to the keys";
  // The bytes: at 32-token blocks the cold part is at most 55% of int4's (here 50%).
  KvGeometry g{5, 2, 4, 8};  // stories260K: 5 layers, 4 KV heads of 8
  const uint64_t int4 = kv_block_bytes(g, KvType::kInt4, 32);
  const uint64_t k3v2_bytes = kv_block_bytes(g, KvTypePair{KvType::kInt3, KvType::kInt2}, 32);
  EXPECT_LE(static_cast<double>(k3v2_bytes), 0.55 * static_cast<double>(int4));
  EXPECT_EQ(model_->config().num_layers, 5);
  EXPECT_EQ(model_->config().num_kv_heads, 4);
  EXPECT_EQ(model_->config().head_dim, 8);
}

// int4c: 4 bits with a scale and an offset per channel of a head over a block's 16 rows (as
// KIVI does for keys; 5 bits per value with scales), against int4's scale per row group (6 bits
// at head dim 8), measured the same way:
//   type                 ppl     mean KLD   p99      top-1 changed
//   int4                 4.1727  1.40e-1    1.74     15.9%
//   int4 rotated         3.8112  6.12e-2    0.82     10.0%
//   int4c                3.6095  3.56e-3    4.1e-2   2.57%
//   int4c rotated        3.6222  5.39e-3    6.6e-2   3.11%    (so rotation stays off for int4c)
//   int4c+hot32          3.6001  8.24e-4    1.3e-2   1.01%
// A channel scale follows what varies little along a block (each channel's range) where a row's
// eight values share one scale.
TEST_F(KvFidelityTest, PerChannelInt4IsUsableAlone) {
  const KlStats c = kl_divergence(base_->logprobs, run({KvType::kInt4c, 0, KvType::kInt4c}).logprobs, base_->vocab);
  const KlStats hot = kl_divergence(base_->logprobs, run({KvType::kF16, 32, KvType::kInt4c}).logprobs, base_->vocab);
  KvPrecision rotated{KvType::kInt4, 0, KvType::kInt4};
  rotated.rotated = true;
  const KlStats r = kl_divergence(base_->logprobs, run(rotated).logprobs, base_->vocab);
  std::printf("KLD mean int4c %.6f, int4c+hot32 %.6f, int4 rotated %.6f\n", c.mean, hot.mean, r.mean);
  EXPECT_LE(c.mean, 5.3e-3);
  EXPECT_LE(hot.mean, 1.25e-3);
  EXPECT_LT(hot.mean, c.mean);
  EXPECT_LT(c.mean, r.mean / 10);  // the best row-scaled int4 is an order of magnitude worse
}

// int8c, the same layout at 8 bits (9 bits per value with scales; int8 10 at head dim 8):
//   int8            3.5999  3.24e-4    4.0e-3    0.68%
//   int8 rotated    3.5980  1.56e-4    1.8e-3    0.47%
//   int8c           3.5985  1.78e-5    1.9e-4    0.19%
//   int8c rotated   3.5986  2.86e-5    2.9e-4    0.14%
TEST_F(KvFidelityTest, PerChannelInt8IsTenTimesCloserThanInt8) {
  const KlStats c = kl_divergence(base_->logprobs, run({KvType::kInt8c, 0, KvType::kInt8c}).logprobs, base_->vocab);
  KvPrecision rotated{KvType::kInt8, 0, KvType::kInt8};
  rotated.rotated = true;
  const KlStats r = kl_divergence(base_->logprobs, run(rotated).logprobs, base_->vocab);
  std::printf("KLD mean int8c %.7f, int8 rotated %.7f\n", c.mean, r.mean);
  EXPECT_LE(c.mean, 2.7e-5);
  EXPECT_LT(c.mean, r.mean / 5);
}

TEST_F(KvFidelityTest, KlBaseFileRoundTripsAndRejectsGarbage) {
  std::string path = ::testing::TempDir() + "/kl_base.bin";
  KlBase b{256, base_->vocab, *tokens_, base_->logprobs};
  ASSERT_TRUE(save_kl_base(path, b).ok());
  auto back = load_kl_base(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tokens, b.tokens);
  EXPECT_EQ(back->logprobs, b.logprobs);
  {
    std::ofstream bad(path, std::ios::binary);
    bad << "not a base file";
  }
  auto err = load_kl_base(path);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("--kl-divergence-base"), std::string::npos);
}

TEST_F(KvFidelityTest, Int8TeacherForcedTop5WithinGolden) {
  test::GoldenFile g = test::load_golden("stories260K.json");
  const int vocab = model_->config().vocab;
  float max_err = 0;
  for (const auto& c : g.cases) {
    SingleSequenceOptions o;
    o.max_tokens = 512;
    o.kv_precision = KvPrecision{KvType::kInt8, 0, KvType::kInt8};
    SingleSequence seq(*model_, *pool_, o);
    std::vector<float> logits = seq.append(c.prompt_ids);
    for (size_t step = 0; step < c.output_ids.size(); ++step) {
      auto p = test::softmax_probs(logits.data(), vocab);
      for (const auto& [id, prob] : c.top5[step]) {
        max_err = std::max(max_err, std::fabs(p[id] - prob));
        EXPECT_NEAR(p[id], prob, 0.05f) << c.prompt << " step " << step << " token " << id;
      }
      logits = seq.append({c.output_ids[step]});
    }
  }
  std::printf("int8 KV: max top-5 probability error vs llama.cpp (f16 KV) %.4f\n", max_err);
  RecordProperty("max_prob_err", std::to_string(max_err));
}

// The same meter on a random-weight model whose keys have outlier channels, as trained models'
// do (`synth --outlier-channels 4`: four channels of every K head x20, the queries' /20, so scores
// stay ordinary; the output head x20 for confident predictions; head dim 64): scaling K per row
// lets the outliers flatten every other channel, and rotation spreads them without removing them,
// so only int4c meets 1e-2. Measured on 4 KB of the corpus as bytes, ctx 256 (2 layers):
//   int4 6.26e-2, int4 rotated 2.22e-2, int4c 5.05e-3.
TEST(KvFidelityOutlierTest, OnlyPerChannelInt4MeetsOnePercentWhenKeysHaveOutlierChannels) {
  const std::string dir = test::make_temp_dir("kv-outlier");
  const std::string path = dir + "/outlier.gguf";
  std::string err;
  ASSERT_EQ(test::run_command(std::string(HORIZON_BINARY) + " synth -q -t 2 -o " + path +
                                  " --layers 2 --hidden 256 --heads 4 --kv-heads 2 --ffn 256 --vocab 512 --ctx 4096"
                                  " --outlier-channels 4 --output-scale 20",
                              nullptr, &err),
            0)
      << err;
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto tok = Tokenizer::from_gguf((*m)->file());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  std::ifstream in(test::testdata_path("corpus/stories260K-samples.txt"));
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  const std::vector<int32_t> tokens = (*tok)->encode(text, false, false);
  ThreadPool pool(2);
  auto run = [&](KvType t, bool rotated) {
    PerplexityOptions o;
    o.ctx = 256;
    o.kv = {t, 0, t};
    o.kv.rotated = rotated;
    o.keep_logprobs = true;
    auto r = compute_perplexity(**m, pool, tokens, o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r).value() : PerplexityResult{};
  };
  const PerplexityResult base = run(KvType::kF32, false);
  ASSERT_GT(base.num_scored, 1000);
  auto kld = [&](KvType t, bool rotated) { return kl_divergence(base.logprobs, run(t, rotated).logprobs, base.vocab).mean; };
  const double int4 = kld(KvType::kInt4, false), int4_rot = kld(KvType::kInt4, true), int4c = kld(KvType::kInt4c, false);
  std::printf("outlier model: KLD mean int4 %.6f, int4 rotated %.6f, int4c %.6f\n", int4, int4_rot, int4c);
  EXPECT_GT(int4, 1e-2);
  EXPECT_GT(int4_rot, 1e-2);
  EXPECT_LE(int4c, 1e-2);
}

}  // namespace
}  // namespace hz
