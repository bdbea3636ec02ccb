// Compression of real KV blocks for the disk tier, per KV type and codec: ratio (stored / raw
// bytes) and encode / decode throughput. The blocks come from a prefill of a trained model
// (stories260K by default; HZ_KV_BENCH_MODEL=<file in shared/models> picks another), read out of the
// KV arena exactly as the disk tier writes them.
//   build/bench/kv_disk_codec_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include "kvstore/block_codec.h"
#include "runtime/local_engine.h"

namespace hz {
namespace {

class DoneSink : public GenerationSink {
 public:
  void on_event(GenerationEvent ev) override {
    if (ev.kind != GenerationEvent::Kind::kFinished) return;
    std::lock_guard<std::mutex> lk(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

// Arena bytes of every cached block after one prefill with KV type `t`.
const std::vector<std::vector<uint8_t>>& blocks(KvType t) {
  static std::map<KvType, std::vector<std::vector<uint8_t>>> cache;
  auto it = cache.find(t);
  if (it != cache.end()) return it->second;
  const char* m = std::getenv("HZ_KV_BENCH_MODEL");
  EngineOptions o;
  o.model_path = std::string(HORIZON_SHARED_DIR_DEFAULT) + "/models/" + (m ? m : "stories260K.gguf");
  o.threads = 2;
  o.kv_dtype = t;
  o.enable_prefix_caching = true;
  o.max_num_seqs = 1;
  o.kv_budget_bytes = 64u << 20;
  auto e = LocalEngine::create(o);
  if (!e.ok()) {
    std::fprintf(stderr, "%s\n", e.status().message().c_str());
    std::abort();
  }
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. "
      "One day, she saw a big red ball under a tree. She ran to get it, but a bird flew down and took it away. ";
  std::string text;
  while (text.size() < 1500) text += story;
  GenerationRequest r;
  r.prompt = (*e)->tokenize(text, true, false);
  const int32_t max_prompt = (*e)->model_info().max_model_len - 2;
  if (static_cast<int32_t>(r.prompt.size()) > max_prompt) r.prompt.resize(static_cast<size_t>(max_prompt));
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 1;
  auto sink = std::make_shared<DoneSink>();
  r.sink = sink;
  (void)(*e)->submit(std::move(r));
  sink->wait();
  (*e)->wait_idle(std::chrono::seconds(10));
  const KvCache& kv = (*e)->kv();
  auto& out = cache[t];
  for (int32_t b = 0; b < kv.config().num_blocks; ++b) {
    if (kv.pool().is_cached(b) && !kv.has_staging(b)) out.emplace_back(kv.block_data(b), kv.block_data(b) + kv.block_bytes());
  }
  return out;
}

void run(benchmark::State& state, KvType t, kvstore::Codec c, int level, bool decode) {
  const auto& bs = blocks(t);
  std::vector<std::vector<uint8_t>> comp(bs.size());
  std::vector<kvstore::Codec> used(bs.size());
  uint64_t raw = 0, stored = 0;
  for (size_t i = 0; i < bs.size(); ++i) {
    used[i] = kvstore::compress(c, level, bs[i].data(), bs[i].size(), &comp[i]);
    raw += bs[i].size();
    stored += comp[i].size();
  }
  std::vector<uint8_t> out(bs.empty() ? 0 : bs[0].size());
  std::vector<uint8_t> scratch;
  for (auto _ : state) {
    for (size_t i = 0; i < bs.size(); ++i) {
      if (decode) {
        if (!kvstore::decompress(used[i], comp[i].data(), comp[i].size(), out.data(), out.size()).ok()) state.SkipWithError("decode");
      } else {
        kvstore::compress(c, level, bs[i].data(), bs[i].size(), &scratch);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * raw));
  state.counters["ratio"] = raw ? static_cast<double>(stored) / raw : 0;
  state.counters["blocks"] = static_cast<double>(bs.size());
}

void register_all() {
  struct C {
    const char* name;
    kvstore::Codec codec;
    int level;
  };
  const C codecs[] = {{"zstd1", kvstore::Codec::kZstd, 1}, {"zstd3", kvstore::Codec::kZstd, 3},
                      {"zstd-3", kvstore::Codec::kZstd, -3}, {"lz4", kvstore::Codec::kLz4, 1}};
  for (KvType t : all_kv_types()) {
    for (const C& c : codecs) {
      for (bool decode : {false, true}) {
        std::string name = std::string("kv_disk/") + kv_type_name(t) + "/" + c.name + (decode ? "/decode" : "/encode");
        benchmark::RegisterBenchmark(name.c_str(), [t, c, decode](benchmark::State& s) { run(s, t, c.codec, c.level, decode); })
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

const int kRegistered = (register_all(), 0);

}  // namespace
}  // namespace hz
