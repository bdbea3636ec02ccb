// `horizon bench engine`: in-process prefill (pp) and decode (tg, optionally at a depth) speed of
// one sequence through a Model, repeated, with the conditions of the run. Like llama-bench's
// pp/tg and "tg at depth d"; the depth can be reached by a real prefill or by synthetic KV entries.
#pragma once

#include "kv/kv_layout.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/stats.h"
#include "runtime/engine_options.h"
#include "tensor/dtype.h"

namespace hz::bench {

enum class FillMode { kSynthetic, kPrefill };

struct EngineBenchOptions {
  std::string model_path;
  // kCuda / kHostEmulation: the model and KV cache on the device (model/device_model.h); the KV
  // cache is then f16, bf16 or f32, in device memory (no --kv-budget, --kv-disk-dir).
  EngineDevice device = EngineDevice::kCpu;
  int32_t threads = 0;  // 0: all hardware threads
  KvPrecision kv;  // KV types and hot window, as the engine flags resolve them
  int32_t block_size = 16;
  int32_t prefill_chunk = 512;
  std::vector<int64_t> prompt_lengths = {512};  // pp tests; empty: none
  int32_t gen_tokens = 128;                     // tg tests; 0: none
  std::vector<int64_t> depths = {0};            // one tg test per depth
  // Sequences decoded together in the tg tests: each step carries one new token of each (their
  // depth is reached by prefill, one sequence after another). 1: the single-sequence tests.
  int32_t batch = 1;
  int32_t reps = 3;
  FillMode fill = FillMode::kSynthetic;
  bool warmup = true;
  uint64_t seed = 1;
  // RAM for the sequence's KV (0: all of it), and a far tier for the rest (kv/far_tier.h).
  uint64_t kv_budget_bytes = 0;
  std::string kv_disk_dir;
  uint64_t kv_disk_budget_bytes = uint64_t{64} << 30;
  // Decode tests: before each repetition the far tier's file leaves the page cache, so its blocks
  // come from disk (the cold-cache figure).
  bool far_cold = false;
  // Device decode tests with a synthetic fill: after the fill, the last layer's attention for one
  // query over every key checked against a host reference (DeviceSequence::check_synthetic_attention).
  bool check_attention = false;
};

struct EngineBenchResult {
  std::string test;  // "pp512", "tg128", "tg128@d8192", "tg128x16@d512" (16 sequences)
  bool prefill = false;
  int64_t prompt_tokens = 0, gen_tokens = 0, depth = 0;
  int32_t batch = 1;                 // sequences decoded together
  std::vector<double> tokens_per_s;  // one per repetition (all sequences together)
  Summary summary;
  double fill_seconds = 0;  // time to reach the depth (once per test)
  // check_attention: "layer L: max |device - reference| X of Y: pass" (or "... FAIL"); empty if not run.
  std::string attention_check;
  bool attention_check_failed = false;
};

struct EngineBenchReport {
  nlohmann::json conditions;
  std::vector<EngineBenchResult> results;
  nlohmann::json to_json() const;
};

// Called with a short status line ("tg128@d8192 rep 2/3") before each step.
using ProgressFn = std::function<void(const std::string&)>;

// Errors name the option (lengths, reps) or the model file.
Result<EngineBenchReport> run_engine_bench(const EngineBenchOptions& o, const ProgressFn& progress = nullptr);
// The same tests on the device (o.device not the CPU), after run_engine_bench's option checks.
Result<EngineBenchReport> run_device_engine_bench(const EngineBenchOptions& o, const ProgressFn& progress);

const char* fill_mode_name(FillMode m);

}  // namespace hz::bench
