// A model whose activations stop being finite (NaN or infinite weights here): the engine fails the
// request with an error saying so, instead of sampling garbage from NaN logits, and with
// check_finite the error names the first layer and stage whose output was not finite. A healthy
// model with the check on gives the golden tokens (no false alarm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "runtime/local_engine.h"
#include "runtime/perplexity.h"
#include "support/collect_sink.h"
#include "support/golden.h"
#include "support/test_support.h"

namespace hz {
namespace {

using test::CollectSink;

// A copy of stories260K (F32 weights) with element `element` of `tensor` set to `value`.
std::string poisoned_copy(const std::string& dir, const std::string& tensor, uint64_t element, float value) {
  const std::string src = test::model_path("stories260K.gguf");
  auto file = GgufFile::open(src);
  EXPECT_TRUE(file.ok()) << file.status().message();
  const GgufTensorInfo* info = file->get_tensor(tensor);
  EXPECT_NE(info, nullptr) << tensor;
  EXPECT_EQ(info->dtype, DType::kF32);
  std::ifstream in(src, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const uint64_t at = file->data_offset() + info->offset + element * sizeof(float);
  EXPECT_LE(at + sizeof(float), bytes.size());
  std::memcpy(bytes.data() + at, &value, sizeof value);
  const std::string out = dir + "/" + tensor + ".gguf";
  std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out;
}

std::unique_ptr<LocalEngine> make_engine(const std::string& path, bool check_finite) {
  EngineOptions o;
  o.model_path = path;
  o.threads = 2;
  o.prefill_chunk = 5;  // prompts in several steps
  o.check_finite = check_finite;
  auto e = LocalEngine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

// 15 tokens: three prefill steps of 5.
std::vector<int32_t> prompt() { return test::load_golden("stories260K.json").cases.at(2).prompt_ids; }

std::shared_ptr<CollectSink> run(LocalEngine& e, const std::vector<int32_t>& ids, int n = 8) {
  auto sink = std::make_shared<CollectSink>();
  EXPECT_TRUE(e.submit(test::greedy_request(ids, n, sink)).ok());
  EXPECT_TRUE(sink->wait());
  return sink;
}

// Fails with an error containing `want` and no token.
void expect_failure(LocalEngine& e, const std::string& want) {
  const auto s = run(e, prompt());
  EXPECT_EQ(s->final_event.finish_reason, FinishReason::kError);
  EXPECT_TRUE(s->ids.empty());
  const std::string msg = s->final_event.error.message();
  EXPECT_NE(msg.find("logits after position"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find(want), std::string::npos) << msg;
}

TEST(NonFiniteTest, NanInALayerFailsTheRequestAndTheCheckNamesTheLayer) {
  const std::string dir = test::make_temp_dir("non_finite");
  const std::string path = poisoned_copy(dir, "blk.2.ffn_up.weight", 640, std::numeric_limits<float>::quiet_NaN());
  auto plain = make_engine(path, false);
  ASSERT_NE(plain, nullptr);
  expect_failure(*plain, "run with --check-finite");
  expect_failure(*plain, "run with --check-finite");  // the engine goes on serving
  plain.reset();
  auto checked = make_engine(path, true);
  ASSERT_NE(checked, nullptr);
  expect_failure(*checked, "layer 2's feed-forward at position 0");
}

TEST(NonFiniteTest, InfinityInAttentionIsNamed) {
  const std::string dir = test::make_temp_dir("non_finite");
  auto e = make_engine(poisoned_copy(dir, "blk.0.attn_v.weight", 3, std::numeric_limits<float>::infinity()), true);
  ASSERT_NE(e, nullptr);
  expect_failure(*e, "layer 0's attention at position 0");
}

// The embedding row of the first prompt token not seen before it: the position is that token's,
// in the first of the prompt's three prefill steps (the error comes after the last: the engine
// keeps the first site of a request across its steps).
TEST(NonFiniteTest, NanInAnEmbeddingRowIsNamedWithItsPosition) {
  const std::vector<int32_t> ids = prompt();
  ASSERT_GT(ids.size(), 10u);
  size_t k = 1;
  while (k < ids.size() && std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids[k]) != ids.begin() + static_cast<std::ptrdiff_t>(k)) ++k;
  ASSERT_LT(k, 5u);
  const std::string dir = test::make_temp_dir("non_finite");
  const uint64_t hidden = 64;
  auto e = make_engine(poisoned_copy(dir, "token_embd.weight", static_cast<uint64_t>(ids[k]) * hidden + 5,
                                     std::numeric_limits<float>::quiet_NaN()),
                       true);
  ASSERT_NE(e, nullptr);
  expect_failure(*e, "the embedding at position " + std::to_string(k));
}

TEST(NonFiniteTest, NanInTheOutputHeadIsBlamedOnIt) {
  const std::string dir = test::make_temp_dir("non_finite");
  auto e = make_engine(poisoned_copy(dir, "output.weight", 100 * 64 + 1, std::numeric_limits<float>::quiet_NaN()), true);
  ASSERT_NE(e, nullptr);
  expect_failure(*e, "so the output head produced them");
}

TEST(NonFiniteTest, HealthyModelWithTheCheckGivesTheGoldenTokens) {
  auto e = make_engine(test::model_path("stories260K.gguf"), true);
  ASSERT_NE(e, nullptr);
  const test::GoldenFile g = test::load_golden("stories260K.json");
  for (const auto& c : g.cases) {
    const auto s = run(*e, c.prompt_ids, static_cast<int>(c.output_ids.size()));
    EXPECT_EQ(s->final_event.finish_reason, FinishReason::kLength) << s->final_event.error.message();
    EXPECT_EQ(s->ids, c.output_ids) << c.prompt;
  }
}

// Perplexity: an error instead of "nan", naming the site with the check (windows of 32 in
// prefill steps of 8; the embedding of the window's token k breaks at position k).
TEST(NonFiniteTest, PerplexityFailsNamingTheSite) {
  const std::vector<int32_t> ids = prompt();
  size_t k = 1;
  while (k < ids.size() && std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids[k]) != ids.begin() + static_cast<std::ptrdiff_t>(k)) ++k;
  ASSERT_LT(k, 8u);
  std::vector<int32_t> tokens;
  while (tokens.size() < 96) tokens.insert(tokens.end(), ids.begin(), ids.end());
  const std::string dir = test::make_temp_dir("non_finite");
  auto m = Model::load(poisoned_copy(dir, "token_embd.weight", static_cast<uint64_t>(ids[k]) * 64 + 9,
                                     -std::numeric_limits<float>::infinity()));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ThreadPool pool(2);
  PerplexityOptions o;
  o.ctx = 32;
  o.prefill_chunk = 8;
  for (bool check : {false, true}) {
    (*m)->set_check_finite(check);
    auto r = compute_perplexity(**m, pool, tokens, o);
    ASSERT_FALSE(r.ok()) << "perplexity " << r->ppl;
    const std::string msg = r.status().message();
    EXPECT_NE(msg.find("not finite"), std::string::npos) << msg;
    EXPECT_NE(msg.find(check ? "the embedding at position " + std::to_string(k) : "--check-finite"), std::string::npos)
        << msg;
  }
}

TEST(NonFiniteTest, TheCheckIsRefusedOnTheDevice) {
  EngineOptions o;
  o.model_path = test::model_path("stories260K.gguf");
  o.check_finite = true;
  o.device = EngineDevice::kHostEmulation;
  auto e = LocalEngine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--check-finite"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace hz
