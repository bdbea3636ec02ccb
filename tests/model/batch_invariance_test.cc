// Batch- and chunk-invariance: a sequence's logits are bit-identical whether it runs alone, batched
// with other sequences, or with its prompt prefilled in chunks of any size.
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

// All-position logits of `tokens` prefilled in chunks of `chunk`.
std::vector<float> logits_chunked(Model& m, ThreadPool& pool, const std::vector<int32_t>& tokens, int chunk) {
  SingleSequence seq(m, pool, {.max_tokens = 1024});
  std::vector<float> out;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    std::vector<int32_t> part(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + chunk));
    const auto& l = seq.append(part, /*all_logits=*/true);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

class BatchInvarianceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchInvarianceTest, ChunkSizeDoesNotChangeLogits) {
  auto m = Model::load(test::model_path(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  auto tokens = random_tokens(150, (*m)->config().vocab, 1);
  std::vector<float> whole = logits_chunked(**m, pool, tokens, 1000);
  for (int chunk : {1, 7, 64}) {
    std::vector<float> chunked = logits_chunked(**m, pool, tokens, chunk);
    ASSERT_EQ(whole.size(), chunked.size());
    EXPECT_EQ(0, std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float))) << "chunk " << chunk;
  }
}

TEST_P(BatchInvarianceTest, ThreadCountDoesNotChangeLogits) {
  auto m = Model::load(test::model_path(GetParam()));
  ASSERT_TRUE(m.ok());
  auto tokens = random_tokens(40, (*m)->config().vocab, 2);
  ThreadPool one(1), three(3);
  std::vector<float> a = logits_chunked(**m, one, tokens, 1000);
  std::vector<float> b = logits_chunked(**m, three, tokens, 9);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// Three sequences in one KV cache, decoded together in one forward call per step (mixed prefill
// and decode), against each decoded alone.
TEST_P(BatchInvarianceTest, BatchedWithOthersEqualsAlone) {
  auto m = Model::load(test::model_path(GetParam()));
  ASSERT_TRUE(m.ok());
  Model& model = **m;
  ThreadPool pool(2);
  const int vocab = model.config().vocab;
  std::vector<std::vector<int32_t>> prompts = {random_tokens(20, vocab, 3), random_tokens(5, vocab, 4),
                                               random_tokens(33, vocab, 5)};
  const int steps = 6;
  // Alone: greedy continuation, logits per step.
  std::vector<std::vector<float>> alone(prompts.size());
  std::vector<std::vector<int32_t>> conts(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    SingleSequence seq(model, pool, {.max_tokens = 256});
    std::vector<float> l = seq.append(prompts[s]);
    for (int i = 0; i < steps; ++i) {
      alone[s].insert(alone[s].end(), l.begin(), l.end());
      int32_t tok = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
      conts[s].push_back(tok);
      l = seq.append({tok});
    }
  }
  // Together: sequence 1 starts one step late (so prefill and decode share a batch).
  KvCacheConfig kc{model.config().num_layers, model.config().num_kv_heads, model.config().head_dim, 16, DType::kF16, 64};
  KvCache kv(kc);
  std::vector<std::vector<BlockRef>> tables(prompts.size());
  for (auto& t : tables) kv.pool().allocate_n(8, &t);
  std::vector<int64_t> pos(prompts.size(), 0);
  std::vector<int> done(prompts.size(), 0);
  std::vector<std::vector<float>> together(prompts.size());
  std::vector<float> logits;
  for (int round = 0; round < steps + 1; ++round) {
    std::vector<SeqSlice> batch;
    std::vector<size_t> who;
    std::vector<std::vector<int32_t>> feed(prompts.size());
    for (size_t s = 0; s < prompts.size(); ++s) {
      if (s == 1 && round == 0) continue;
      if (done[s] >= steps) continue;
      feed[s] = pos[s] == 0 ? prompts[s] : std::vector<int32_t>{conts[s][done[s] - 1]};
      SeqSlice x;
      x.tokens = feed[s].data();
      x.num_tokens = static_cast<int32_t>(feed[s].size());
      x.start_pos = pos[s];
      x.block_table = tables[s].data();
      batch.push_back(x);
      who.push_back(s);
    }
    if (batch.empty()) break;
    model.forward(batch, kv, pool, &logits);
    for (size_t i = 0; i < who.size(); ++i) {
      size_t s = who[i];
      together[s].insert(together[s].end(), logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
      pos[s] += batch[i].num_tokens;
      ++done[s];
    }
  }
  for (size_t s = 0; s < prompts.size(); ++s) {
    ASSERT_EQ(alone[s].size(), together[s].size()) << "sequence " << s;
    EXPECT_EQ(0, std::memcmp(alone[s].data(), together[s].data(), alone[s].size() * sizeof(float))) << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvarianceTest,
                         ::testing::Values("stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf",
                                           "synth-tiny-f16.gguf", "synth-tiny-q4_0.gguf", "stories260K-moe4.gguf"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 5);
                           for (auto& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace hz
