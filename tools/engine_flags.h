// Flags shared by every subcommand that runs the engine (run, serve, bench engine, perplexity):
// one definition, so a flag means the same everywhere.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "base/status.h"
#include "runtime/engine_options.h"

namespace hz::cli {

struct EngineFlags {
  EngineOptions opts;
  std::string kv_dtype = "auto";
  std::string kv_cold_dtype = "int8";
  std::string kv_budget;  // bytes ("4GiB") or a share of RAM ("50%")
  std::string kv_disk_budget = "64GiB";
  std::string kv_disk_dtype = "same";
  std::string device = "cpu";  // cpu or cuda (tools/device_flag.h)

  // ---- RoPE scaling flags (architectures, issue 8) ----
  std::string rope_scaling;     // empty: the file's
  float rope_freq_base = 0;     // 0: the file's
  float rope_freq_scale = 0;    // 0: the file's
  int32_t yarn_orig_ctx = 0;    // 0: the file's
  // ---- end RoPE scaling flags ----

  // Adds the flags; `server` adds the scheduler flags that only matter with many requests.
  void add_to(CLI::App& app, bool server);
  // Converts the string flags; errors name the flag.
  Result<EngineOptions> resolve() const;
};

// A KV element type name as the flags take it: auto (= f16), f32, f16, bf16, fp8 / fp8_e4m3,
// int8 / q8_0, int4 / q4_0 (case-insensitive). Errors name `flag`.
Result<KvType> parse_kv_type(const std::string& name, const char* flag);

}  // namespace hz::cli
