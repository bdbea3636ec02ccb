// Bounded memory at depth 64K (synth-tiny-f16, native context 131072): one sequence of 65,536
// positions with a RAM pool of 2,048 positions — 1/32 of its KV — and its far blocks on disk
// (kv/far_tier.h). Its logits at every step (a real 512-token prompt chunk at depth ~64K, then 16
// decoded tokens) must be bit-identical to an all-RAM run with the same KV type, and its peak RSS
// must stay within the planner's figure for that configuration: RAM pool + far window (one layer
// of the far blocks, mapped while that layer's attention reads them) + KV staging + weights + the
// fixed overhead of the process. The depth is reached with synthetic K/V entries (see
// depth_128k_slow_test.cc). Each run is a forked child (its own ru_maxrss) that writes its logits
// to a file.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
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

constexpr int64_t kContext = 65536;
constexpr int32_t kRealTokens = 512;
constexpr int32_t kGenTokens = 16;
constexpr int32_t kChunk = 512;
constexpr int32_t kThreads = 2;
constexpr int32_t kRamTokens = 2048;
// As in depth_128k_slow_test.cc: the process itself and one chunk's working buffers.
constexpr uint64_t kFixedOverhead = uint64_t{16} << 20;

std::string model() { return test::model_path("synth-tiny-f16.gguf"); }

// The scenario in this (child) process; writes every step's logits to `out`. Exit code 0 on success.
int scenario(const KvPrecision& prec, const std::string& far_dir, const std::string& out) {
  auto m = Model::load(model());
  if (!m.ok()) return 2;
  ThreadPool pool(kThreads);
  SingleSequenceOptions so;
  so.max_tokens = static_cast<int32_t>(kContext);
  so.kv_precision = prec;
  so.prefill_chunk = kChunk;
  if (!far_dir.empty()) so.ram_tokens = kRamTokens;
  SingleSequence seq(**m, pool, so);
  if (!far_dir.empty() && !seq.enable_far(far_dir, uint64_t{1} << 30).ok()) return 3;
  if (!seq.fill_synthetic(kContext - kRealTokens - kGenTokens, 7).ok()) return 4;
  std::mt19937 rng(5);
  std::vector<int32_t> prompt(kRealTokens);
  for (auto& t : prompt) t = 3 + static_cast<int32_t>(rng() % 509);
  std::ofstream f(out, std::ios::binary);
  const std::vector<float>* l = &seq.append(prompt);
  for (int32_t i = 0;; ++i) {
    f.write(reinterpret_cast<const char*>(l->data()), static_cast<std::streamsize>(l->size() * sizeof(float)));
    if (i == kGenTokens) break;
    const int32_t next = static_cast<int32_t>(std::max_element(l->begin(), l->end()) - l->begin());
    l = &seq.append({next});
  }
  if (!f) return 5;
  if (!far_dir.empty() && seq.far()->stats().blocks < static_cast<uint64_t>((kContext - kRamTokens) / 16)) return 6;
  return seq.num_tokens() == kContext ? 0 : 7;
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class FarTierDepthTest : public ::testing::TestWithParam<KvPrecision> {};

TEST_P(FarTierDepthTest, BitIdenticalToAllInRamWithinThePlannersFigure) {
  const KvPrecision prec = GetParam();
  auto shape = load_model_shape(model());
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  const KvGeometry g = shape->kv_geometry();
  const uint64_t ram_kv = kv_bytes_for_tokens(g, prec, 16, kRamTokens);
  const uint64_t far_window = kv_far_window_bytes(g, prec, 16, kContext, kRamTokens);
  const uint64_t all_kv = kv_bytes_for_tokens(g, prec, 16, kContext);
  const uint64_t staging = kv_staging_bytes(g, prec, 16, kChunk, 1);
  PlanOptions po;
  po.memory_bytes = uint64_t{64} << 30;
  po.kv = prec;
  po.max_model_len = kContext;
  po.prefill_chunk_tokens = kChunk;
  po.num_threads = kThreads;
  auto plan = make_plan(*shape, po);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const uint64_t bound = ram_kv + far_window + staging + plan->weights_bytes + kFixedOverhead;

  const std::string dir = test::make_temp_dir("far_depth");
  const test::ChildRun ram = test::run_in_child([&] { return scenario(prec, "", dir + "/ram.bin"); });
  ASSERT_EQ(ram.exit_code, 0);
  const test::ChildRun far = test::run_in_child([&] { return scenario(prec, dir, dir + "/far.bin"); });
  ASSERT_EQ(far.exit_code, 0);
  std::printf("depth 64K, KV %s: all in RAM: peak RSS %s (KV %s), %.1f s; RAM pool %d tokens + far tier: peak RSS %s, "
              "%.1f s; bound: RAM KV %s + far window %s + staging %s + weights %s + fixed %s = %s\n",
              kv_precision_name(prec).c_str(), format_bytes(ram.peak_rss).c_str(), format_bytes(all_kv).c_str(), ram.seconds,
              kRamTokens, format_bytes(far.peak_rss).c_str(), far.seconds, format_bytes(ram_kv).c_str(),
              format_bytes(far_window).c_str(), format_bytes(staging).c_str(), format_bytes(plan->weights_bytes).c_str(),
              format_bytes(kFixedOverhead).c_str(), format_bytes(bound).c_str());
  const std::vector<char> a = slurp(dir + "/ram.bin"), b = slurp(dir + "/far.bin");
  ASSERT_EQ(a.size(), static_cast<size_t>(kGenTokens + 1) * 512 * sizeof(float));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "far blocks must read back exactly";
  EXPECT_LE(far.peak_rss, bound) << "over by " << format_bytes(far.peak_rss - bound);
  // Not vacuous: the all-RAM run needs more than the bound (its KV alone is 32x the pool).
  EXPECT_GT(ram.peak_rss, bound);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, FarTierDepthTest, ::testing::Values(test::uniform_kv(KvType::kF16), test::uniform_kv(KvType::kInt8)),
                         [](const auto& info) { return std::string(kv_type_name(info.param.hot)); });

}  // namespace
}  // namespace hz
