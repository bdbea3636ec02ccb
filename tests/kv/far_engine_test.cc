// The far tier in the engine (LocalEngine + scheduler): with --kv-disk-dir, sequences longer than
// the RAM pool run with their far blocks on disk instead of being refused or preempted, and give
// the same tokens and bit-identical log-probabilities as an engine with all KV in RAM — alone or
// two at once. A far block corrupted on disk is detected by its checksum and the sequence is
// recomputed (same output, never served); a failed far tier (ENOSPC) stops spilling: what fits
// in RAM still runs, what cannot gets a clear error and the engine goes on.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "runtime/local_engine.h"
#include "support/collect_sink.h"
#include "support/test_support.h"

namespace hz {
namespace {

using test::CollectSink;

constexpr uint64_t kBlockBytes = 16 * 1024;  // synth-tiny-f16: 4 layers x K,V x 2 heads x 32 x f16, 16 positions
constexpr int32_t kRamBlocks = 12;

std::unique_ptr<LocalEngine> make_engine(const std::string& far_dir, int32_t max_seqs = 1, int32_t hot_window = 0,
                                         std::optional<KvTypePair> cold = std::nullopt) {
  EngineOptions o;
  o.model_path = test::model_path("synth-tiny-f16.gguf");
  o.threads = 2;
  o.max_model_len = 4096;
  o.max_num_seqs = max_seqs;
  o.prefill_chunk = 64;
  o.max_num_batched_tokens = 128;
  o.kv_dtype = KvType::kF16;
  if (hot_window > 0) {
    o.kv_hot_window = hot_window;
    o.kv_cold_dtype = KvType::kInt4;
  }
  if (cold) {
    o.kv_cold_dtype = cold->k;
    o.kv_cold_dtype_v = cold->v;
  }
  o.kv_budget_bytes = far_dir.empty() ? (uint64_t{16} << 20) : kRamBlocks * kBlockBytes * static_cast<uint64_t>(max_seqs);
  o.kv_disk_dir = far_dir;
  o.kv_disk_budget_bytes = 32u << 20;
  auto e = LocalEngine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> prompt(uint32_t seed, int32_t n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(3 + rng() % 500);
  return p;
}

std::shared_ptr<CollectSink> submit(LocalEngine& e, const std::vector<int32_t>& p, int32_t max_tokens = 24) {
  auto sink = std::make_shared<CollectSink>();
  GenerationRequest r;
  r.prompt = p;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 5;
  r.sink = sink;
  auto id = e.submit(std::move(r));
  EXPECT_TRUE(id.ok()) << id.status().message();
  return sink;
}

std::shared_ptr<CollectSink> generate(LocalEngine& e, const std::vector<int32_t>& p, int32_t max_tokens = 24) {
  auto sink = submit(e, p, max_tokens);
  EXPECT_TRUE(sink->wait());
  EXPECT_TRUE(e.wait_idle(std::chrono::seconds(120)));
  return sink;
}

void expect_same(const CollectSink& a, const CollectSink& b) {
  EXPECT_EQ(a.final_event.finish_reason, FinishReason::kLength) << a.final_event.error.message();
  EXPECT_EQ(b.final_event.finish_reason, FinishReason::kLength) << b.final_event.error.message();
  EXPECT_EQ(a.ids, b.ids);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].first, b.top[i].first) << i;
    EXPECT_EQ(std::memcmp(&a.top[i].second, &b.top[i].second, sizeof(float)), 0) << i;
  }
}

TEST(FarEngineTest, LongerThanRamGivesTheSameOutputAsAllInRam) {
  const std::string dir = test::make_temp_dir("far_engine");
  const auto p = prompt(1, 900);  // 57 blocks for 12 in RAM
  auto ram = make_engine("");
  ASSERT_NE(ram, nullptr);
  auto want = generate(*ram, p);
  ram.reset();
  auto far = make_engine(dir);
  ASSERT_NE(far, nullptr);
  auto got = generate(*far, p);
  expect_same(*want, *got);
  const EngineStats st = far->stats();
  EXPECT_TRUE(st.kv_far_enabled);
  EXPECT_GT(st.kv_far_spills, 40u);
  EXPECT_GT(st.kv_far_read_bytes, 0u);
  EXPECT_EQ(st.kv_far_checksum_failures, 0u);
  EXPECT_EQ(st.preemptions_total, 0u) << "far blocks go to disk instead of the sequence being preempted";
  EXPECT_EQ(st.kv_far_blocks, 0u) << "a finished sequence's far blocks are freed";
  EXPECT_EQ(st.kv_blocks_total, kRamBlocks);
  far.reset();
  std::filesystem::remove_all(dir);
}

// A hot window over int4 (arena blocks of about a quarter of f16's): the far tier works (far
// blocks are read cold); only the prefix store is off.
TEST(FarEngineTest, HotWindowOverInt4) {
  const std::string dir = test::make_temp_dir("far_engine");
  const auto p = prompt(9, 900);
  auto ram = make_engine("", 1, 64);
  ASSERT_NE(ram, nullptr);
  auto want = generate(*ram, p);
  ram.reset();
  auto far = make_engine(dir, 1, 64);
  ASSERT_NE(far, nullptr);
  auto got = generate(*far, p);
  expect_same(*want, *got);
  EXPECT_GT(far->stats().kv_far_spills, 0u);
  EXPECT_FALSE(far->stats().kv_disk_enabled);
  far.reset();
  std::filesystem::remove_all(dir);
}

// Cold keys and values in different types (K int4c, V int2): far blocks keep both planes, in their
// own sizes, with their own checksum segments.
TEST(FarEngineTest, HotWindowOverSeparateKeyAndValueTypes) {
  const std::string dir = test::make_temp_dir("far_engine");
  const auto p = prompt(10, 900);
  const KvTypePair cold{KvType::kInt4c, KvType::kInt2};
  auto ram = make_engine("", 1, 32, cold);
  ASSERT_NE(ram, nullptr);
  auto want = generate(*ram, p);
  ram.reset();
  auto far = make_engine(dir, 1, 32, cold);
  ASSERT_NE(far, nullptr);
  auto got = generate(*far, p);
  expect_same(*want, *got);
  EXPECT_GT(far->stats().kv_far_spills, 0u);
  EXPECT_EQ(far->stats().kv_far_checksum_failures, 0u);
  far.reset();
  std::filesystem::remove_all(dir);
}

TEST(FarEngineTest, TwoLongSequencesAtOnce) {
  const std::string dir = test::make_temp_dir("far_engine");
  const auto p1 = prompt(2, 700), p2 = prompt(3, 500);
  auto ram = make_engine("");
  ASSERT_NE(ram, nullptr);
  auto want1 = generate(*ram, p1), want2 = generate(*ram, p2);
  ram.reset();
  auto far = make_engine(dir, 2);
  ASSERT_NE(far, nullptr);
  auto got1 = submit(*far, p1), got2 = submit(*far, p2);
  ASSERT_TRUE(got1->wait());
  ASSERT_TRUE(got2->wait());
  expect_same(*want1, *got1);
  expect_same(*want2, *got2);
  EXPECT_GT(far->stats().kv_far_spills, 40u);
  far.reset();
  std::filesystem::remove_all(dir);
}

TEST(FarEngineTest, CorruptFarBlockIsRecomputedNeverServed) {
  const std::string dir = test::make_temp_dir("far_engine");
  const auto p = prompt(4, 800);
  auto ram = make_engine("");
  ASSERT_NE(ram, nullptr);
  auto want = generate(*ram, p);
  ram.reset();
  auto far = make_engine(dir);
  ASSERT_NE(far, nullptr);
  bool corrupted = false;
  // Engine thread, between steps: flip a byte of a far block that later steps will read.
  far->set_step_hook([&corrupted](FarTier* t) {
    if (corrupted || t == nullptr || t->num_used() < 8) return;
    ASSERT_TRUE(t->corrupt_for_test(3, 1, 100).ok());
    corrupted = true;
  });
  auto got = generate(*far, p);
  EXPECT_TRUE(corrupted);
  expect_same(*want, *got);
  const EngineStats st = far->stats();
  EXPECT_GE(st.kv_far_checksum_failures, 1u);
  EXPECT_EQ(st.kv_far_recomputes, 1u);
  far.reset();
  std::filesystem::remove_all(dir);
}

TEST(FarEngineTest, FailedFarTierKeepsServingWhatFitsInRam) {
  const std::string dir = test::make_temp_dir("far_engine");
  auto far = make_engine(dir);
  ASSERT_NE(far, nullptr);
  far->set_kv_disk_io_fault([](const char* op) { return std::string(op) == "write" ? io_error("ENOSPC (injected)") : Status(); });
  // Longer than RAM: once the far tier fails it cannot go on, and says so.
  auto big = generate(*far, prompt(5, 900));
  EXPECT_EQ(big->final_event.finish_reason, FinishReason::kError);
  EXPECT_NE(big->final_event.error.message().find("KV cache is full"), std::string::npos) << big->final_event.error.message();
  EXPECT_TRUE(far->stats().kv_far_degraded);
  EXPECT_EQ(far->stats().kv_far_io_errors, 1u);
  // What fits in RAM still runs, with the same output as an all-RAM engine.
  const auto small = prompt(6, 100);
  auto got = generate(*far, small);
  auto ram = make_engine("");
  ASSERT_NE(ram, nullptr);
  auto want = generate(*ram, small);
  expect_same(*want, *got);
  far.reset();
  std::filesystem::remove_all(dir);
}

TEST(FarEngineTest, RamPoolSmallerThanAChunkRunsWithoutTheFarTier) {
  const std::string dir = test::make_temp_dir("far_engine");
  EngineOptions o;
  o.model_path = test::model_path("synth-tiny-f16.gguf");
  o.threads = 1;
  o.max_model_len = 4096;
  o.prefill_chunk = 512;  // 32 blocks, and the pool holds 12
  o.kv_budget_bytes = kRamBlocks * kBlockBytes;
  o.kv_disk_dir = dir;
  auto e = LocalEngine::create(o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_FALSE((*e)->stats().kv_far_enabled);
  // Longer than the pool: refused up front, with the way out in the message.
  GenerationRequest r;
  r.prompt = prompt(7, 300);
  r.sampling.max_tokens = 4;
  r.sink = std::make_shared<CollectSink>();
  auto id = (*e)->submit(std::move(r));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("--kv-budget"), std::string::npos) << id.status().message();
  // What fits runs.
  auto ok = generate(**e, prompt(8, 100), 4);
  EXPECT_EQ(ok->final_event.finish_reason, FinishReason::kLength);
  e->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hz
