// Read bandwidth of this machine: a streaming sum over a 256 MiB buffer with 1 and 2 threads.
// The physical limit that decode speed is compared against (bytes read per token x tokens/s).
// Two variants: a plain uint64 sum (portable) and 256-bit loads (AVX2), which is what the kernels
// use; the scalar loop can be limited by instructions rather than memory, the AVX2 one is not.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{256} << 20;

uint64_t sum_range(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  return a + b + c + d;
}

__attribute__((target("avx2"))) uint64_t sum_range_avx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  const __m256i* v = reinterpret_cast<const __m256i*>(p);
  for (size_t i = 0; i + 16 <= n; i += 16, v += 4) {
    a = _mm256_add_epi64(a, _mm256_loadu_si256(v));
    b = _mm256_add_epi64(b, _mm256_loadu_si256(v + 1));
    c = _mm256_add_epi64(c, _mm256_loadu_si256(v + 2));
    d = _mm256_add_epi64(d, _mm256_loadu_si256(v + 3));
  }
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  return out[0] + out[1] + out[2] + out[3];
}

template <bool kAvx2>
void BM_StreamingRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  static std::vector<uint64_t> buf = [] {
    std::vector<uint64_t> v(kBytes / 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
  }();
  const size_t n = buf.size();
  for (auto _ : state) {
    std::vector<uint64_t> partial(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] { const uint64_t* begin = buf.data() + n * t / threads;
        partial[t] = kAvx2 ? sum_range_avx2(begin, n / threads) : sum_range(begin, n / threads); });
    }
    for (auto& t : ts) t.join();
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kBytes);
}
BENCHMARK(BM_StreamingRead<false>)->Name("BM_StreamingRead")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamingRead<true>)->Name("BM_StreamingReadAvx2")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
