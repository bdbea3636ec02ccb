// Generation at depth 128K on synth-tiny-f16 (native context 131072): peak RSS must stay within the
// planner's KV figure + the weights + a fixed overhead. Each configuration runs in a forked child,
// so its ru_maxrss (wait4) is its own high-water mark. The depth is reached by synthetic K/V entries
// for all but the last 528 positions (a real 128K prefill takes over an hour on 2 cores: attention
// is quadratic), then a real 512-token prompt chunk attends over the whole depth, and 16
// tokens are decoded: the prefill activations, staging copies and decode paths all run at 128K.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "base/byte_size.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "planner/capacity_plan.h"
#include "model/model_shape.h"
#include "runtime/single_sequence.h"
#include "support/forked_run.h"
#include "support/test_support.h"

namespace hz {
namespace {

constexpr int64_t kContext = 131072;
constexpr int32_t kRealTokens = 512;
constexpr int32_t kGenTokens = 16;
constexpr int32_t kChunk = 512;
constexpr int32_t kThreads = 2;
// Fixed overhead over the planner's KV figure (with its KV staging term) + weights: the process
// itself — code of the test binary and its shared libraries, libc / libstdc++ heaps, thread stacks,
// ~6 MiB for a process that only loads this model — plus the engine's working buffers for one
// 512-token chunk (activations, logits, attention scratch per thread: ~3 MiB for this model by the
// planner's runtime_overhead, which adds a 64 MiB allowance for big models that is not wanted here)
// plus allocator slack. Measured: 7.7-9.5 MiB above KV + weights (see the printed figures).
constexpr uint64_t kFixedOverhead = uint64_t{16} << 20;

std::string model() { return test::model_path("synth-tiny-f16.gguf"); }

// Runs the scenario in this (child) process; exit code 0 on success.
int scenario(const KvPrecision& prec) {
  auto m = Model::load(model());
  if (!m.ok()) return 2;
  ThreadPool pool(kThreads);
  SingleSequenceOptions so;
  so.max_tokens = static_cast<int32_t>(kContext);
  so.block_tokens = 16;
  so.kv_precision = prec;
  so.prefill_chunk = kChunk;
  SingleSequence seq(**m, pool, so);
  const int64_t synthetic = kContext - kRealTokens - kGenTokens;
  if (!seq.fill_synthetic(synthetic, 7).ok()) return 3;
  std::mt19937 rng(5);
  std::vector<int32_t> prompt(kRealTokens);
  for (auto& t : prompt) t = 3 + static_cast<int32_t>(rng() % 509);
  const std::vector<float>& logits = seq.append(prompt);
  int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  for (int32_t i = 0; i < kGenTokens; ++i) {
    const std::vector<float>& l = seq.append({next});
    next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    for (float x : l) {
      if (!std::isfinite(x)) return 4;
    }
  }
  return seq.num_tokens() == kContext ? 0 : 5;
}

class Depth128kTest : public ::testing::TestWithParam<KvPrecision> {};

TEST_P(Depth128kTest, PeakRssWithinPlannerKvPlusWeightsPlusFixedOverhead) {
  const KvPrecision prec = GetParam();
  auto shape = load_model_shape(model());
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  PlanOptions po;
  po.memory_bytes = uint64_t{64} << 30;
  po.kv = prec;
  po.max_num_seqs = 1;
  po.max_model_len = kContext;
  po.block_tokens = 16;
  po.prefill_chunk_tokens = kChunk;
  po.num_threads = kThreads;
  auto plan = make_plan(*shape, po);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->requested_context, static_cast<uint64_t>(kContext));
  const uint64_t bound = plan->requested_kv_bytes + plan->overhead.kv_staging + plan->weights_bytes + kFixedOverhead;

  const test::ChildRun m = test::run_in_child([&] { return scenario(prec); });
  ASSERT_EQ(m.exit_code, 0);
  std::printf("depth 128K, KV %s: peak RSS %s; planner KV %s + KV staging %s + weights %s + fixed %s = %s; %.1f s\n",
              kv_precision_name(prec).c_str(), format_bytes(m.peak_rss).c_str(), format_bytes(plan->requested_kv_bytes).c_str(),
              format_bytes(plan->overhead.kv_staging).c_str(), format_bytes(plan->weights_bytes).c_str(),
              format_bytes(kFixedOverhead).c_str(), format_bytes(bound).c_str(), m.seconds);
  EXPECT_LE(m.peak_rss, bound) << "over by " << format_bytes(m.peak_rss - bound);
  // The bound is not vacuous: the KV cache is most of it.
  EXPECT_GT(plan->requested_kv_bytes, kFixedOverhead);
}

INSTANTIATE_TEST_SUITE_P(Types, Depth128kTest, ::testing::Values(test::uniform_kv(KvType::kF16), test::uniform_kv(KvType::kInt8),
                                                                   test::windowed_kv(4096, KvType::kInt4)),
                         [](const auto& info) { return test::kv_param_name(info.param); });

}  // namespace
}  // namespace hz
