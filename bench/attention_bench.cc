// Attention of one decode token over a deep KV cache, per KV type, old path vs new: the old path is
// the previous design (one call per query head, each tile decoded to f32 then dotted), kept here as
// a baseline; "new" is AttentionRunner (one task per GQA group, fused kernels) on 1 thread and on 2
// threads with the key range split (flash-decoding). Shape: one layer of the llama-1b preset
// (32 heads, 8 KV heads, head dim 64). Counters: KV bytes read per second (GB/s).
// Run: build/bench/attention_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>

#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "model/attention.h"
#include "model/attention_runner.h"

namespace hz {
namespace {

constexpr int32_t kHeads = 32, kKvHeads = 8, kHd = 64;

const KvType kTypes[] = {KvType::kF16, KvType::kInt8, KvType::kFp8, KvType::kInt4};

struct Cache {
  std::unique_ptr<KvCache> kv;
  std::vector<BlockRef> table;
};

Cache& cache(KvType t, int64_t depth) {
  static std::map<std::pair<int, int64_t>, Cache> caches;
  Cache& c = caches[{static_cast<int>(t), depth}];
  if (c.kv) return c;
  caches.clear();  // one cache alive at a time (32K f16 is 64 MiB)
  Cache& n = caches[{static_cast<int>(t), depth}];
  KvCacheConfig kc;
  kc.num_layers = 1;
  kc.num_kv_heads = kKvHeads;
  kc.head_dim = kHd;
  kc.block_tokens = 16;
  kc.num_blocks = static_cast<int32_t>((depth + 1 + 15) / 16);
  kc.precision = KvPrecision{t, 0, t};
  n.kv = std::make_unique<KvCache>(kc);
  n.kv->pool().allocate_n(kc.num_blocks, &n.table);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t p = 0; p <= depth; ++p) {
    for (int32_t st = 0; st < 2; ++st) {
      for (int32_t h = 0; h < kKvHeads; ++h) {
        auto* row = reinterpret_cast<uint16_t*>(n.kv->write_row(n.table[p / 16], 0, st, h, static_cast<int32_t>(p % 16)));
        for (int32_t i = 0; i < kHd; ++i) row[i] = f32_to_f16(nd(rng));
      }
    }
  }
  n.kv->seal_layer(0, n.table.data(), 0, depth + 1);
  n.kv->commit(n.table.data(), depth + 1);
  return n;
}

// ---- the previous path: per head, per tile decode to f32, then dot / axpy ----
void old_attend(const KvCache& kv, const BlockRef* table, int32_t kv_head, const float* q, int64_t pos, float* out,
                std::vector<float>& kt, std::vector<float>& vt) {
  const int32_t hd = kHd, bt = 16;
  float total_max = 0, total_sum = 0;
  bool total_empty = true;
  std::vector<float> seg(hd);
  float scores[16];
  for (int64_t s0 = 0; s0 <= pos; s0 += 256) {
    float m = 0, sum = 0;
    bool empty = true;
    for (int64_t t0 = s0; t0 < std::min(pos + 1, s0 + 256); t0 += 16) {
      const int32_t n = static_cast<int32_t>(std::min<int64_t>(16, pos + 1 - t0));
      const BlockRef block = table[t0 / bt];
      const kernels::KvCodec c = kv.arena_type(0);  // K and V share the type here
      const uint8_t* kp = kv.plane(block, 0, 0);
      const uint8_t* vp = kv.plane(block, 0, 1);
      const uint64_t reb = kernels::kv_row_elem_bytes(c, hd), rsb = kernels::kv_row_scale_bytes(c, hd);
      const uint64_t eoff = kv.head_elem_offset(c, kv_head) + (t0 % bt) * reb;
      const uint64_t soff = kv.head_scale_offset(c, kv_head) + (t0 % bt) * rsb;
      const bool f16 = c == kernels::KvCodec::kF16;  // the old path read f16 rows directly
      const auto* kh = reinterpret_cast<const uint16_t*>(kp + eoff);
      const auto* vh = reinterpret_cast<const uint16_t*>(vp + eoff);
      if (!f16) {
        kernels::decode_kv_rows(c, kp + eoff, kp + soff, n, hd, kt.data());
        kernels::decode_kv_rows(c, vp + eoff, vp + soff, n, hd, vt.data());
      }
      float tmax = -std::numeric_limits<float>::infinity();
      for (int32_t j = 0; j < n; ++j) {
        scores[j] = f16 ? kernels::dot_f32_f16(q, kh + j * hd, hd) : kernels::dot_f32(q, &kt[j * hd], hd);
        tmax = std::max(tmax, scores[j]);
      }
      const float nm = empty ? tmax : std::max(m, tmax);
      if (empty) {
        std::fill(seg.begin(), seg.end(), 0.0f);
      } else {
        const float corr = std::exp(m - nm);
        sum *= corr;
        kernels::scale(seg.data(), corr, hd);
      }
      empty = false;
      m = nm;
      for (int32_t j = 0; j < n; ++j) {
        const float p = std::exp(scores[j] - m);
        sum += p;
        if (f16) {
          kernels::axpy_f16(seg.data(), p, vh + j * hd, hd);
        } else {
          kernels::axpy(seg.data(), p, &vt[j * hd], hd);
        }
      }
    }
    if (total_empty) {
      std::memcpy(out, seg.data(), sizeof(float) * hd);
      total_max = m;
      total_sum = sum;
      total_empty = false;
    } else {
      const float nm = std::max(total_max, m), ca = std::exp(total_max - nm), cb = std::exp(m - nm);
      total_sum = total_sum * ca + sum * cb;
      kernels::scale(out, ca, hd);
      kernels::axpy(out, cb, seg.data(), hd);
      total_max = nm;
    }
  }
  kernels::scale(out, 1.0f / total_sum, hd);
}

std::vector<float> random_q() {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(kHeads * kHd);
  for (auto& x : q) x = nd(rng);
  return q;
}

double kv_bytes(const KvCache& kv, int64_t depth) {
  const kernels::KvCodec c = kv.arena_type(0);
  const double row = static_cast<double>(kernels::kv_row_elem_bytes(c, kHd) + kernels::kv_row_scale_bytes(c, kHd));
  return row * 2 * kKvHeads * static_cast<double>(depth + 1);
}

// range(0): depth, range(1): type index, range(2): 0 old, 1 new 1 thread, 2 new 2 threads split.
void BM_DecodeAttention(benchmark::State& state) {
  const int64_t depth = state.range(0);
  const KvType t = kTypes[state.range(1)];
  const int64_t path = state.range(2);
  Cache& c = cache(t, depth);
  const std::vector<float> q = random_q();
  std::vector<float> out(q.size());
  const float qscale = 1.0f / std::sqrt(static_cast<float>(kHd));
  ThreadPool pool(path == 2 ? 2 : 1);
  AttentionRunner runner;
  KvReadTable read;
  read.reset(*c.kv, c.table.data(), depth, depth + 1);
  read.bind_layer(0);
  AttnQueryRow row{&read, depth};
  AttnJob job;
  job.head_dim = kHd;
  job.num_heads = kHeads;
  job.num_kv_heads = kKvHeads;
  job.q_scale = qscale;
  job.q = q.data();
  job.out = out.data();
  job.rows = &row;
  job.num_tokens = 1;
  std::vector<float> kt(16 * kHd), vt(16 * kHd), qs(kHd);
  for (auto _ : state) {
    if (path == 0) {
      for (int32_t h = 0; h < kHeads; ++h) {
        for (int32_t i = 0; i < kHd; ++i) qs[i] = q[h * kHd + i] * qscale;
        old_attend(*c.kv, c.table.data(), h / (kHeads / kKvHeads), qs.data(), depth, &out[h * kHd], kt, vt);
      }
    } else {
      runner.run(job, pool);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(kv_bytes(*c.kv, depth) * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  static const char* kPath[] = {"old", "new-1t", "new-2t-split"};
  state.SetLabel(std::string(kv_type_name(t)) + " " + kPath[path]);
}

void args(benchmark::internal::Benchmark* b) {
  for (int64_t depth : {256, 1024, 8192, 32768}) {
    for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t) {
      for (int64_t path : {0, 1, 2}) b->Args({depth, t, path});
    }
  }
}
BENCHMARK(BM_DecodeAttention)->Apply(args)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace hz
