// Decode throughput at depth per KV configuration on synth-tiny-f16 (head dim 32, 2 KV heads, 4
// layers): the cache is filled to `depth` positions with random K/V written directly (prefilling
// 32K tokens would dominate the run) and then one token per step is decoded. Also prints bytes
// per token per KV type for a Llama-3-8B shape and the longest context that fits in 4 GiB.
// Run: build/bench/kv_decode_bench --benchmark_min_time=1 (HORIZON_SHARED_DIR or ../shared)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace hz {
namespace {

struct Config {
  const char* name;
  KvPrecision p;
};
const Config kConfigs[] = {
    {"f16", {KvType::kF16, 0, KvType::kF16}},   {"int8", {KvType::kInt8, 0, KvType::kInt8}},
    {"fp8", {KvType::kFp8, 0, KvType::kFp8}},   {"int4", {KvType::kInt4, 0, KvType::kInt4}},
    {"f16+hot1024+int4", {KvType::kF16, 1024, KvType::kInt4}},
};

Model* model() {
  static Model* m = [] {
    const char* dir = std::getenv("HORIZON_SHARED_DIR");
    std::string path = std::string(dir ? dir : "../shared") + "/models/synth-tiny-f16.gguf";
    auto r = Model::load(path);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().message().c_str());
      std::exit(1);
    }
    return std::move(r).value().release();
  }();
  return m;
}

void BM_Decode(benchmark::State& state) {
  const int64_t depth = state.range(0);
  const Config& cfg = kConfigs[state.range(1)];
  Model& m = *model();
  const ModelConfig& c = m.config();
  KvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_tokens = 16;
  kc.precision = cfg.p;
  const int64_t steps_max = 4096;
  kc.num_blocks = static_cast<int32_t>((depth + steps_max + 15) / 16);
  KvCache kv(kc);
  std::vector<BlockRef> table;
  kv.pool().allocate_n(kc.num_blocks, &table);
  // Random K/V for positions [0, depth): rows written exactly, then sealed and committed as a
  // prefill would leave them.
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(c.head_dim);
  for (int64_t p = 0; p < depth; ++p) {
    for (int32_t l = 0; l < c.num_layers; ++l) {
      for (int32_t st = 0; st < 2; ++st) {
        for (int32_t h = 0; h < c.num_kv_heads; ++h) {
          for (auto& x : row) x = nd(rng);
          uint8_t* d = kv.write_row(table[p / 16], l, st, h, static_cast<int32_t>(p % 16));
          if (kv.exact_codec() == kernels::KvCodec::kF16) {
            kernels::f32_to_f16_row(row.data(), reinterpret_cast<uint16_t*>(d), c.head_dim);
          } else {
            std::memcpy(d, row.data(), sizeof(float) * c.head_dim);
          }
        }
      }
      kv.seal_layer(l, table.data(), 0, depth);
    }
  }
  kv.commit(table.data(), depth);
  ThreadPool pool(0);
  std::vector<float> logits;
  int64_t pos = depth;
  int32_t tok = 5;
  for (auto _ : state) {
    if (pos >= depth + steps_max) state.SkipWithError("too many steps");
    SeqSlice s;
    s.tokens = &tok;
    s.num_tokens = 1;
    s.start_pos = pos++;
    s.block_table = table.data();
    m.forward({s}, kv, pool, &logits);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["KV_B/token"] = kv.memory().arena_bytes_per_token();
  state.SetLabel(cfg.name);
}

void args(benchmark::internal::Benchmark* b) {
  for (int64_t depth : {1024, 8192, 32768}) {
    for (int64_t i = 0; i < static_cast<int64_t>(std::size(kConfigs)); ++i) b->Args({depth, i});
  }
}
BENCHMARK(BM_Decode)->Apply(args)->Unit(benchmark::kMillisecond)->Iterations(200)->UseRealTime();

// Llama-3-8B shape: bytes per token and the longest context in 4 GiB, per KV type.
void BM_Llama3_8bFigures(benchmark::State& state) {
  KvGeometry g{32, 2, 8, 128};
  for (auto _ : state) {
  }
  const KvType t = all_kv_types()[state.range(0)];
  const double bpt = kv_bytes_per_token(g, t, 16);
  state.counters["B/token"] = bpt;
  state.counters["tokens_in_4GiB"] = static_cast<double>((uint64_t{4} << 30) / kv_block_bytes(g, t, 16) * 16);
  state.SetLabel(kv_type_name(t));
}
BENCHMARK(BM_Llama3_8bFigures)->DenseRange(0, 5)->Iterations(1);

}  // namespace
}  // namespace hz
