// Flags shared by every subcommand that runs or plans the engine (run, serve, chat, bench engine,
// perplexity, plan, doctor): one definition, so a flag means the same everywhere. Also accepts the
// spellings of llama-server and vLLM where they mean the same thing.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "base/status.h"
#include "runtime/engine_options.h"

namespace hz::cli {

struct EngineFlags {
  EngineOptions opts;
  std::string model_positional;  // `horizon serve MODEL` (vLLM) = -m MODEL
  std::string kv_dtype = "auto";
  std::string kv_dtype_k, kv_dtype_v;      // --kv-cache-dtype-k/-v (llama.cpp's -ctk / -ctv): "" = --kv-cache-dtype
  std::string kv_cold_dtype;               // "" = int8 (only with --kv-hot-window)
  std::string kv_cold_dtype_k, kv_cold_dtype_v;  // "" = --kv-cold-dtype
  std::string kv_rotation = "auto";        // auto, on, off
  std::string kv_budget;  // bytes ("4GiB") or a share of RAM ("50%")
  std::string kv_disk_budget = "64GiB";
  std::string kv_disk_dtype = "same";
  std::string spec = "off";  // speculative decoding: off or ngram
  bool quiet = false;     // no progress bars or start-up summary
  int32_t total_ctx = 0;  // llama.cpp's -c: context of all sequences together (0 = unset)
  bool server = false;    // added with the scheduler flags: -c is shared by --max-num-seqs

  // Accepted for command lines written for GPU servers; each gets one warning when given.
  std::string flash_attn;       // -fa on|off|auto
  int32_t n_gpu_layers = -1;    // -ngl N
  double gpu_memory_utilization = -1;
  std::string device = "cpu";  // cpu or cuda (tools/device_flag.h)

  // ---- RoPE scaling flags (context extension) ----
  std::string rope_scaling;     // empty: the file's
  float rope_freq_base = 0;     // 0: the file's
  float rope_freq_scale = 0;    // 0: the file's
  int32_t yarn_orig_ctx = 0;    // 0: the file's
  // ---- end RoPE scaling flags ----

  // Adds the flags; `server` adds the scheduler flags that only matter with many requests.
  void add_to(CLI::App& app, bool server);
  // Converts the string flags and logs one warning per flag accepted without effect; errors name
  // the flag. `need_model` = false for commands that may run without one (doctor).
  Result<EngineOptions> resolve(bool need_model = true) const;
};

// A KV element type name as the flags take it: auto (= f16), f32, f16, bf16, fp8 / fp8_e4m3,
// int8 / q8_0, int4 / q4_0 (case-insensitive). Errors name `flag`.
Result<KvType> parse_kv_type(const std::string& name, const char* flag);

}  // namespace hz::cli
