// Mixture-of-experts throughput: prefill and decode tokens/s of a synthetic MoE model (8 experts,
// top-2) against its dense equivalent (same active parameters: dense FFN = 2 x expert FFN), both
// Q4_0 with random weights, written with GgufWriter into $TMPDIR/horizon_moe_bench (kept for reuse).
// Shape from HZ_MOE_BENCH_SHAPE=small|1b (default small: 8 layers x 1024; 1b: 16 x 2048, ~1B
// active). Run: build/bench/moe_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/thread_pool.h"
#include "format/gguf.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/single_sequence.h"

namespace hz {
namespace {

struct Shape {
  int32_t layers, hidden, heads, kv_heads, expert_ffn, experts, used, vocab;
};

Shape shape() {
  const char* s = std::getenv("HZ_MOE_BENCH_SHAPE");
  if (s != nullptr && std::string(s) == "1b") return {16, 2048, 32, 8, 2816, 8, 2, 32000};
  return {8, 1024, 16, 4, 1408, 8, 2, 8192};
}

// xorshift: fast enough to fill gigabytes of weights.
struct Rng {
  uint64_t s;
  float next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / (1 << 23);  // [-1, 1)
  }
};

void add_q4_0(GgufWriter& g, const std::string& name, std::vector<uint64_t> dims, uint64_t seed) {
  const int64_t cols = static_cast<int64_t>(dims[0]);
  const float scale = std::sqrt(3.0f / cols);
  g.add_tensor(name, DType::kQ4_0, dims, [cols, scale, seed](uint8_t* dst, uint64_t num_bytes) {
    Rng rng{seed * 0x9E3779B97F4A7C15ull + 1};
    std::vector<float> row(cols);
    const uint64_t rb = row_bytes(DType::kQ4_0, cols);
    for (uint64_t off = 0; off < num_bytes; off += rb) {
      for (auto& v : row) v = rng.next() * scale;
      kernels::quantize_row_q4_0(row.data(), reinterpret_cast<BlockQ4_0*>(dst + off), cols);
    }
  });
}

std::string model_path(bool moe) {
  const Shape s = shape();
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/horizon_moe_bench";
  std::filesystem::create_directories(dir);
  const std::string path = fmt::format("{}/{}-{}x{}-{}.gguf", dir, moe ? "moe" : "dense", s.layers, s.hidden, s.vocab);
  if (std::filesystem::exists(path)) return path;
  GgufWriter g;
  g.set_str("general.architecture", "llama");
  g.set_u32("llama.block_count", s.layers);
  g.set_u32("llama.embedding_length", s.hidden);
  g.set_u32("llama.feed_forward_length", moe ? s.expert_ffn : s.expert_ffn * s.used);
  g.set_u32("llama.attention.head_count", s.heads);
  g.set_u32("llama.attention.head_count_kv", s.kv_heads);
  g.set_u32("llama.context_length", 4096);
  if (moe) {
    g.set_u32("llama.expert_count", s.experts);
    g.set_u32("llama.expert_used_count", s.used);
  }
  const uint64_t H = s.hidden, kd = s.hidden / s.heads * s.kv_heads, V = s.vocab;
  uint64_t seed = 1;
  const std::vector<float> ones(H, 1.0f);
  add_q4_0(g, "token_embd.weight", {H, V}, seed++);
  add_q4_0(g, "output.weight", {H, V}, seed++);
  g.add_tensor_data("output_norm.weight", DType::kF32, {H}, ones.data());
  for (int32_t l = 0; l < s.layers; ++l) {
    auto n = [l](const char* x) { return fmt::format("blk.{}.{}", l, x); };
    g.add_tensor_data(n("attn_norm.weight"), DType::kF32, {H}, ones.data());
    g.add_tensor_data(n("ffn_norm.weight"), DType::kF32, {H}, ones.data());
    add_q4_0(g, n("attn_q.weight"), {H, H}, seed++);
    add_q4_0(g, n("attn_k.weight"), {H, kd}, seed++);
    add_q4_0(g, n("attn_v.weight"), {H, kd}, seed++);
    add_q4_0(g, n("attn_output.weight"), {H, H}, seed++);
    if (moe) {
      const uint64_t F = s.expert_ffn, E = s.experts;
      add_q4_0(g, n("ffn_gate_inp.weight"), {H, E}, seed++);
      add_q4_0(g, n("ffn_gate_exps.weight"), {H, F, E}, seed++);
      add_q4_0(g, n("ffn_up_exps.weight"), {H, F, E}, seed++);
      add_q4_0(g, n("ffn_down_exps.weight"), {F, H, E}, seed++);
    } else {
      const uint64_t F = s.expert_ffn * s.used;
      add_q4_0(g, n("ffn_gate.weight"), {H, F}, seed++);
      add_q4_0(g, n("ffn_up.weight"), {H, F}, seed++);
      add_q4_0(g, n("ffn_down.weight"), {F, H}, seed++);
    }
  }
  Status st = g.write(path + ".tmp");
  if (!st.ok()) {
    fmt::print(stderr, "moe_bench: {}\n", st.message());
    std::abort();
  }
  std::filesystem::rename(path + ".tmp", path);
  return path;
}

Model& model(bool moe) {
  static std::unique_ptr<Model> m[2];
  if (!m[moe]) {
    auto r = Model::load(model_path(moe));
    if (!r.ok()) {
      fmt::print(stderr, "moe_bench: {}\n", r.status().message());
      std::abort();
    }
    m[moe] = std::move(r).value();
  }
  return *m[moe];
}

ThreadPool& pool() {
  static ThreadPool p(0);
  return p;
}

std::vector<int32_t> tokens(int n, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7919 + 13) % vocab;
  return t;
}

// arg 0: moe (1) or dense (0).
void BM_Prefill(benchmark::State& state) {
  Model& m = model(state.range(0) != 0);
  const int n = 128;
  const auto prompt = tokens(n, m.config().vocab);
  SingleSequence seq(m, pool(), {.max_tokens = 256});
  for (auto _ : state) {
    seq.reset();
    benchmark::DoNotOptimize(seq.append(prompt).data());
  }
  state.counters["tok/s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB"] = static_cast<double>(m.streamed_weight_bytes()) / 1e9;
  state.SetLabel(state.range(0) ? "moe 8x top-2" : "dense (same active params)");
}

void BM_Decode(benchmark::State& state) {
  Model& m = model(state.range(0) != 0);
  const auto prompt = tokens(16, m.config().vocab);
  SingleSequence seq(m, pool(), {.max_tokens = 512});
  seq.append(prompt);
  int32_t tok = 5;
  for (auto _ : state) {
    if (seq.num_tokens() >= 500) {
      state.PauseTiming();
      seq.reset();
      seq.append(prompt);
      state.ResumeTiming();
    }
    const auto& l = seq.append({tok});
    tok = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  }
  state.counters["tok/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(m.streamed_weight_bytes()),
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.SetLabel(state.range(0) ? "moe 8x top-2" : "dense (same active params)");
}

BENCHMARK(BM_Prefill)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Decode)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace hz
