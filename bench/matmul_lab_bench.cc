// Weight-matmul kernel lab: for Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and F16 weights, the model's matmul shapes (rows x cols:
// 2048x2048, 2048x8192, 8192x2048, 32000x2048) over 1..512 tokens on 1 or 2 threads. Each case first
// checks the kernel against the scalar reference (bit-exact on a sample of rows and every token),
// then times it. Weights rotate over enough copies to exceed the L3 cache, so decode figures are
// memory-bound figures. Reports GB/s of weights and GOP/s (2 * rows * cols * tokens), mean and best
// iteration (the machine is shared: the best is the least disturbed).
// Variants: AVX2 and AVX-512 VNNI kernels on GGUF rows and on the packed layout, the scalar reference.
// Run: build/bench/matmul_lab_bench --benchmark_filter='BM_Matmul/type:0/shape:0/tokens:64/threads:1'
//      --benchmark_min_time=0.3   (filters match the argument names; the label names type and shape)
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/quantize_kquants.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels {
namespace {

struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{2048, 2048}, {2048, 8192}, {8192, 2048}, {32000, 2048}};
const DType kTypes[] = {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kF16};
constexpr uint64_t kMinWorkingSet = 256ull << 20;  // > L3: decode streams from memory

// Only Q4_0 and Q8_0 have the packed layout (variants 1 and 4).
bool has_packed_layout(DType t) { return t == DType::kQ4_0 || t == DType::kQ8_0; }

struct Weights {
  DType type;
  Shape shape;
  uint64_t row_bytes = 0, matrix_bytes = 0;
  int copies = 0;
  std::vector<uint8_t> data;
  uint64_t packed_matrix_bytes = 0;
  std::vector<uint8_t> packed;  // the same copies in the packed layout
};

Weights& weights_for(DType type, Shape s) {
  static std::vector<std::unique_ptr<Weights>> cache;
  for (auto& w : cache) {
    if (w->type == type && w->shape.rows == s.rows && w->shape.cols == s.cols) return *w;
  }
  // Only one weight set at a time (they are large).
  cache.clear();
  auto w = std::make_unique<Weights>();
  w->type = type;
  w->shape = s;
  w->row_bytes = row_bytes(type, s.cols);
  w->matrix_bytes = w->row_bytes * s.rows;
  w->copies = static_cast<int>(std::max<uint64_t>(1, (kMinWorkingSet + w->matrix_bytes - 1) / w->matrix_bytes));
  w->data.resize(w->matrix_bytes * w->copies);
  madvise(w->data.data(), w->data.size(), MADV_HUGEPAGE);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> f(s.cols);
  for (int64_t r = 0; r < s.rows; ++r) {
    for (auto& v : f) v = dist(rng);
    uint8_t* dst = w->data.data() + r * w->row_bytes;
    switch (type) {
      case DType::kQ4_0: quantize_row_q4_0(f.data(), reinterpret_cast<BlockQ4_0*>(dst), s.cols); break;
      case DType::kQ8_0: quantize_row_q8_0(f.data(), reinterpret_cast<BlockQ8_0*>(dst), s.cols); break;
      case DType::kQ4_K: quantize_row_q4_k(f.data(), reinterpret_cast<BlockQ4_K*>(dst), s.cols); break;
      case DType::kQ5_K: quantize_row_q5_k(f.data(), reinterpret_cast<BlockQ5_K*>(dst), s.cols); break;
      case DType::kQ6_K: quantize_row_q6_k(f.data(), reinterpret_cast<BlockQ6_K*>(dst), s.cols); break;
      default: f32_to_f16_row(f.data(), reinterpret_cast<uint16_t*>(dst), s.cols); break;
    }
  }
  for (int c = 1; c < w->copies; ++c) std::memcpy(w->data.data() + c * w->matrix_bytes, w->data.data(), w->matrix_bytes);
  if (!has_packed_layout(type)) {
    cache.push_back(std::move(w));
    return *cache.back();
  }
  w->packed_matrix_bytes = packed_bytes(type, s.rows, s.cols);
  w->packed.resize(w->packed_matrix_bytes * w->copies);
  madvise(w->packed.data(), w->packed.size(), MADV_HUGEPAGE);
  for (int c = 0; c < w->copies; ++c) {
    pack_weights(type, s.cols, w->data.data(), w->row_bytes, s.rows, w->packed.data() + c * w->packed_matrix_bytes);
  }
  cache.push_back(std::move(w));
  return *cache.back();
}

std::vector<uint8_t> make_activations(DType wtype, int64_t n, int64_t num_tokens) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const uint64_t rb = activation_row_bytes(wtype, n);
  std::vector<uint8_t> x(rb * num_tokens);
  std::vector<float> f(n);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (auto& v : f) v = dist(rng);
    quantize_activation_row(wtype, f.data(), x.data() + t * rb, n);
  }
  return x;
}

// The model's driver (Model::matmul): row chunks, multiples of 16, taken from a shared counter.
// Packed weights take packed activations, regrouped once per matmul (as Model::matmul does).
void run_matmul(ThreadPool& pool, bool packed, DType type, int64_t n, const uint8_t* w, uint64_t wrb, int64_t rows,
                const uint8_t* x, uint64_t xrb, int64_t num_tokens, float* y) {
  static std::vector<uint8_t> xp;  // filled here, read by every pool thread
  if (packed) {
    xp.resize(packed_activation_bytes(n, num_tokens));
    pack_activations(n, reinterpret_cast<const BlockQ8_0*>(x), xrb, num_tokens, xp.data());
  }
  int64_t chunk = std::max<int64_t>(16, rows / (pool.num_threads() * 8));
  chunk = (chunk + 15) / 16 * 16;
  const int64_t num_tasks = (rows + chunk - 1) / chunk;
  pool.parallel_for(num_tasks, [&](int64_t task, int) {
    const int64_t r0 = task * chunk, r1 = std::min(rows, r0 + chunk);
    if (packed) {
      matmul_packed(type, n, w, r0, r1, xp.data(), num_tokens, y, rows);
    } else {
      matmul(type, n, w, wrb, r0, r1, x, xrb, num_tokens, y, rows);
    }
  });
}

// Every token of a sample of rows (both ends, groups straddling chunk boundaries) against the
// scalar reference (float weights: vec_dot), bit for bit. Returns "" or what differs.
std::string check_against_reference(ThreadPool& pool, bool packed, DType type, Shape s, const Weights& w, const std::vector<uint8_t>& x,
                                    uint64_t xrb, int64_t num_tokens, std::vector<float>& y) {
  run_matmul(pool, packed, type, s.cols, packed ? w.packed.data() : w.data.data(), w.row_bytes, s.rows, x.data(), xrb,
             num_tokens, y.data());
  const int64_t sample[] = {0, 1, 7, 8, 15, 16, 17, s.rows / 2 + 3, s.rows - 9, s.rows - 1};
  for (int64_t r : sample) {
    for (int64_t t = 0; t < num_tokens; t += (num_tokens > 64 ? 7 : 1)) {
      // Integer block sums equal the scalar reference; float weights (an FMA chain in 8 lanes)
      // equal the same ISA's vec_dot, the batch-invariance contract.
      float want;
      if (traits(type).block_elems > 1) {
        ref::vec_dot(type, s.cols, w.data.data() + r * w.row_bytes, x.data() + t * xrb, &want);
      } else {
        vec_dot(type, s.cols, w.data.data() + r * w.row_bytes, x.data() + t * xrb, &want);
      }
      const float got = y[t * s.rows + r];
      if (std::memcmp(&got, &want, 4) != 0) return "mismatch vs reference at row " + std::to_string(r) + " token " + std::to_string(t);
    }
  }
  return "";
}

// Restores the VNNI switch on scope exit (a variant forces it on or off).
struct VnniScope {
  bool before = vnni_enabled();
  bool wide_before = vnni_wide_enabled();
  VnniScope(bool on, bool wide) {
    force_vnni(on);
    force_vnni_wide(wide);
  }
  ~VnniScope() {
    force_vnni(before);
    force_vnni_wide(wide_before);
  }
};

// Restores the AMX switch on scope exit.
struct AmxScope {
  bool before = amx_enabled();
  explicit AmxScope(bool on) { force_amx(on); }
  ~AmxScope() { force_amx(before); }
};

// args: type index, shape index, tokens, threads, variant (0: AVX2 on GGUF rows, 1: AVX2 on packed
// weights and activations, 2: the scalar reference on GGUF rows, only for 2048x2048 and <= 8 tokens,
// 3: AVX-512 VNNI on GGUF rows, 4: AVX-512 VNNI packed, 5 and 6: as 3 and 4 on 256-bit registers
// only (HORIZON_VNNI=256), 7: packed with AMX tiles from 16 tokens; 3 to 6 need a CPU with
// avx512vl/vnni, 7 one with AMX-INT8)
void BM_Matmul(benchmark::State& state) {
  const DType type = kTypes[state.range(0)];
  const Shape s = kShapes[state.range(1)];
  const int64_t num_tokens = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const int64_t variant = state.range(4);
  const bool packed = variant == 1 || variant == 4 || variant == 6 || variant == 7;
  const bool scalar = variant == 2;
  const bool vnni = variant >= 3;
  if (scalar && (state.range(1) != 0 || num_tokens > 8)) {
    state.SkipWithError("scalar reference timed on 2048x2048, <= 8 tokens only");
    return;
  }
  if (packed && !has_packed_layout(type)) {
    state.SkipWithError("no packed layout for this type");
    return;
  }
  if (vnni && !vnni_supported()) {
    state.SkipWithError("CPU lacks avx512f/bw/vl/vnni");
    return;
  }
  if (variant == 7 && !amx_supported()) {
    state.SkipWithError("CPU or OS offers no AMX-INT8");
    return;
  }
  // AMX first: its scope saves amx_enabled() before the VNNI scope changes what that reports.
  const AmxScope amx_scope(variant == 7);
  const VnniScope vnni_scope(vnni, variant < 5 || variant == 7);
  Weights& w = weights_for(type, s);
  const auto x = make_activations(type, s.cols, num_tokens);
  const uint64_t xrb = activation_row_bytes(type, s.cols);
  std::vector<float> y(s.rows * num_tokens);
  ThreadPool pool(threads);

  // Correctness first (LAB_NO_CHECK=1 skips it, to time an older kernel that is not bit-exact).
  if (std::getenv("LAB_NO_CHECK") == nullptr) {
    const std::string err = check_against_reference(pool, packed, type, s, w, x, xrb, num_tokens, y);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
  }

  const Isa isa_before = active_isa();
  if (scalar) force_isa(Isa::kScalar);
  int copy = 0;
  // The fastest iteration as well as the mean: on a shared, loaded machine the minimum is the figure
  // least disturbed by other processes.
  double best = 1e30;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const uint8_t* wc = packed ? w.packed.data() + copy * w.packed_matrix_bytes : w.data.data() + copy * w.matrix_bytes;
    copy = (copy + 1) % w.copies;
    run_matmul(pool, packed, type, s.cols, wc, w.row_bytes, s.rows, x.data(), xrb, num_tokens, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  force_isa(isa_before);
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(iters * w.matrix_bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["GOP/s"] =
      benchmark::Counter(iters * 2.0 * s.rows * s.cols * num_tokens / 1e9, benchmark::Counter::kIsRate);
  state.counters["best_GB/s"] = w.matrix_bytes / best / 1e9;
  state.counters["best_GOP/s"] = 2.0 * s.rows * s.cols * num_tokens / best / 1e9;
  state.SetLabel(std::string(dtype_name(type)) + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/t" +
                 std::to_string(num_tokens) + "/thr" + std::to_string(threads) +
                 (packed ? "/packed" : scalar ? "/scalar-ref" : "/rows") + (variant == 7 ? "/amx" : vnni ? variant < 5 ? "/vnni" : "/vnni256" : ""));
}

BENCHMARK(BM_Matmul)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3}, {1, 2, 4, 5, 8, 16, 32, 64, 512}, {1, 2}, {0, 1, 2, 3, 4, 5, 6, 7}})
    ->ArgNames({"type", "shape", "tokens", "threads", "variant"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Per-op cost of the thread pool: decode issues ~7 matmuls per layer, each one parallel_for over
// ~16 row chunks. args: threads, tasks. Time per parallel_for of empty tasks.
void BM_ParallelForOverhead(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t tasks = state.range(1);
  std::vector<int64_t> sink(64 * 8);
  for (auto _ : state) {
    pool.parallel_for(tasks, [&](int64_t t, int thread) { sink[thread * 8] += t; });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_ParallelForOverhead)->ArgsProduct({{1, 2}, {2, 16}})->ArgNames({"threads", "tasks"})->UseRealTime();

}  // namespace
}  // namespace hz::kernels
