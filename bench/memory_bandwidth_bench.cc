// Read bandwidth of this machine: a streaming sum over a 256 MiB buffer with 1 and 2 threads.
// The physical limit that decode speed is compared against (bytes read per token x tokens/s).
#include <benchmark/benchmark.h>

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
      ts.emplace_back([&, t] { partial[t] = sum_range(buf.data() + n * t / threads, n / threads); });
    }
    for (auto& t : ts) t.join();
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kBytes);
}
BENCHMARK(BM_StreamingRead)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
