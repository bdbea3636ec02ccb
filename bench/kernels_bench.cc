// Kernel throughput: GB/s of weight bytes streamed by vec_dot (one row per call) and matmul
// (register-tiled, 1 or 8 tokens) per weight type, scalar reference vs AVX2; n = rows = 4096,
// single thread. Run: build/bench/kernels_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace hz::kernels {
namespace {

constexpr int64_t kN = 4096, kRows = 4096;
const DType kTypes[] = {DType::kQ4_0, DType::kQ8_0, DType::kF16, DType::kBF16, DType::kF32,
                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// Random valid weights: quantized from random floats (block types) or random bytes with small f16
// scales (k-quants, whose quantizer is not part of the kernels).
std::vector<uint8_t> make_weights(DType type) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const uint64_t rb = row_bytes(type, kN);
  std::vector<uint8_t> w(rb * kRows);
  std::vector<float> f(kN);
  for (int64_t r = 0; r < kRows; ++r) {
    uint8_t* dst = w.data() + r * rb;
    for (auto& v : f) v = dist(rng);
    switch (type) {
      case DType::kF32: std::memcpy(dst, f.data(), kN * 4); break;
      case DType::kF16: f32_to_f16_row(f.data(), reinterpret_cast<uint16_t*>(dst), kN); break;
      case DType::kBF16: f32_to_bf16_row(f.data(), reinterpret_cast<uint16_t*>(dst), kN); break;
      case DType::kQ8_0: quantize_row_q8_0(f.data(), reinterpret_cast<BlockQ8_0*>(dst), kN); break;
      case DType::kQ4_0: quantize_row_q4_0(f.data(), reinterpret_cast<BlockQ4_0*>(dst), kN); break;
      default: {
        for (uint64_t i = 0; i < rb; ++i) dst[i] = static_cast<uint8_t>(rng());
        const uint32_t bb = traits(type).block_bytes;
        const uint16_t d = f32_to_f16(0.001f);
        for (uint64_t b = 0; b < rb / bb; ++b) {
          std::memcpy(dst + b * bb + (type == DType::kQ6_K ? 208 : 0), &d, 2);
          if (type != DType::kQ6_K) std::memcpy(dst + b * bb + 2, &d, 2);
        }
      }
    }
  }
  return w;
}

std::vector<uint8_t> make_activations(DType wtype, int64_t num_tokens) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const uint64_t rb = activation_row_bytes(wtype, kN);
  std::vector<uint8_t> x(rb * num_tokens);
  std::vector<float> f(kN);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (auto& v : f) v = dist(rng);
    quantize_activation_row(wtype, f.data(), x.data() + t * rb, kN);
  }
  return x;
}

// args: type index, isa (0 scalar, 1 avx2), mode (0: vec_dot per row; k > 0: matmul with k tokens)
void BM_WeightStream(benchmark::State& state) {
  const DType type = kTypes[state.range(0)];
  const Isa isa = state.range(1) ? Isa::kAvx2 : Isa::kScalar;
  const int64_t mode = state.range(2);
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const Isa before = active_isa();
  force_isa(isa);
  const auto w = make_weights(type);
  const int64_t num_tokens = mode == 0 ? 1 : mode;
  const auto x = make_activations(type, num_tokens);
  const uint64_t wrb = row_bytes(type, kN), xrb = activation_row_bytes(type, kN);
  std::vector<float> y(num_tokens * kRows);
  for (auto _ : state) {
    if (mode == 0) {
      for (int64_t r = 0; r < kRows; ++r) vec_dot(type, kN, w.data() + r * wrb, x.data(), &y[r]);
    } else {
      matmul(type, kN, w.data(), wrb, 0, kRows, x.data(), xrb, num_tokens, y.data(), kRows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  force_isa(before);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * wrb * kRows));
  state.SetLabel(std::string(dtype_name(type)) + "/" + isa_name(isa) +
                 (mode == 0 ? "/vec_dot" : "/matmul_x" + std::to_string(mode)));
}

BENCHMARK(BM_WeightStream)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1}, {0, 1, 8}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hz::kernels
