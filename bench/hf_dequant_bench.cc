// Load-time cost of pre-quantized Hugging Face checkpoints: one llama-8b FFN matrix (14336 x 4096)
// as GPTQ 4-bit (groups of 128, act-order), AWQ 4-bit and FP8 with 128x128 block scales, written
// into $TMPDIR/horizon_hf_dequant_bench/<method> (kept for reuse), then opened with HfTensorSource:
// dequantized and stored as Q8_0 on every core. Reports parameters per second.
// Run: build/bench/hf_dequant_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "model/hf_quant.h"
#include "model/hf_tensor_source.h"

namespace hz {
namespace {

constexpr int64_t kOut = 14336, kIn = 4096, kGroup = 128;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return {p, p + v.size() * sizeof(T)};
}

// A folder holding one quantized matrix under model.layers.0.mlp.up_proj, and its config.
std::string folder(const std::string& method, HfQuantConfig* q) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/horizon_hf_dequant_bench/" + method;
  const std::string base = "model.layers.0.mlp.up_proj";
  if (method == "gptq") {
    *q = {HfQuantMethod::kGptq, "gptq", 4, kGroup, 1, 0, 0};
  } else if (method == "awq") {
    *q = {HfQuantMethod::kAwq, "awq", 4, kGroup, 0, 0, 0};
  } else {
    *q = {HfQuantMethod::kFp8, "fp8", 0, 0, 0, 128, 128};
  }
  if (std::filesystem::exists(dir + "/model.safetensors")) return dir;
  std::filesystem::create_directories(dir);
  SafetensorsWriter w;
  const uint64_t groups = kIn / kGroup;
  std::vector<uint16_t> scales(groups * kOut, 0x2000);  // f16 2^-7
  if (method == "gptq") {
    w.add(base + ".qweight", "I32", {kIn / 8, kOut}, random_bytes(kIn / 8 * kOut * 4, 1));
    w.add(base + ".qzeros", "I32", {groups, kOut / 8}, random_bytes(groups * kOut / 8 * 4, 2));
    w.add(base + ".scales", "F16", {groups, kOut}, bytes_of(scales));
    std::vector<int32_t> g_idx(kIn);
    for (int64_t i = 0; i < kIn; ++i) g_idx[i] = static_cast<int32_t>((i * 7 % kIn) / kGroup);
    w.add(base + ".g_idx", "I32", {kIn}, bytes_of(g_idx));
  } else if (method == "awq") {
    w.add(base + ".qweight", "I32", {kIn, kOut / 8}, random_bytes(kIn * kOut / 8 * 4, 1));
    w.add(base + ".qzeros", "I32", {groups, kOut / 8}, random_bytes(groups * kOut / 8 * 4, 2));
    w.add(base + ".scales", "F16", {groups, kOut}, bytes_of(scales));
  } else {
    std::vector<uint8_t> e4m3 = random_bytes(kOut * kIn, 3);
    for (auto& b : e4m3) b &= 0xBF;  // no NaN codes (0x7F / 0xFF)
    w.add(base + ".weight", "F8_E4M3", {kOut, kIn}, e4m3);
    std::vector<float> s((kOut / 128) * (kIn / 128), 0.01f);
    w.add(base + ".weight_scale_inv", "F32", {kOut / 128, kIn / 128}, bytes_of(s));
  }
  if (!w.write(dir + "/model.safetensors").ok()) std::abort();
  return dir;
}

void BM_Dequantize(benchmark::State& state, const std::string& method) {
  HfQuantConfig q;
  const std::string dir = folder(method, &q);
  for (auto _ : state) {
    auto src = HfTensorSource::open(dir, q);
    if (!src.ok()) {
      state.SkipWithError(src.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize((*src)->dequantized().bytes);
  }
  state.counters["params/s"] = benchmark::Counter(static_cast<double>(kOut * kIn) * state.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_Dequantize, gptq4, std::string("gptq"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Dequantize, awq4, std::string("awq"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Dequantize, fp8_block, std::string("fp8"))->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace hz
