// `horizon bench peer` (also `bench engine --peer`): runs horizon and llama.cpp's llama-bench on the
// same GGUF file with the same thread count and prints one comparison table — prefill, decode at depth 0,
// decode at a depth with f16 and 8-bit K/V, optionally the 16K rows and peak RSS — with the ratios.
// Both engines run as child processes (so each one's peak RSS is its own); llama-bench results are
// cached on disk (peer_cache.h), since its long rows take many minutes. With rounds > 0 the run is
// paired instead: every test runs once per engine per round, back to back, never from the cache,
// and each row reports the median of its per-round ratios with their spread (the machine's memory
// bandwidth drifts by tens of percent between minutes, so only ratios taken side by side mean
// anything); a read-bandwidth probe is recorded in every round.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace hz::bench {

struct PeerBenchOptions {
  std::string model_path;
  std::string peer_path;     // llama-bench executable
  // llama-batched-bench, for the decode-at-depth rows where this llama-bench has no -d (builds
  // before early 2025). Empty: the llama-batched-bench beside peer_path, when there is one.
  std::string batched_bench_path;
  std::string horizon_path;  // empty: this executable
  std::string cache_dir;     // empty: default_peer_cache_dir()
  bool use_cache = true;     // false: always rerun the peer (and refresh the cache)
  int32_t threads = 0;       // 0: all hardware threads
  int32_t reps = 3;
  int64_t prompt_tokens = 512;
  int32_t gen_tokens = 128;
  int64_t depth = 4096;       // 0: no decode-at-depth rows
  int32_t rounds = 0;         // > 0: paired rounds (one repetition each, engines alternating)
  bool long_rows = false;    // the rows at long_depth and the long_prompt prefill
  int64_t long_depth = 16384;
  int64_t long_prompt = 16384;
  std::string fill = "synthetic";  // how horizon reaches a depth (bench engine --fill)
  // A llama-bench result is cached only when the 1-minute load average before and after its run
  // stayed at most this (other processes competing for the CPUs make its figures worthless, and
  // a cached figure would be reused for good). < 0: 1.5 x the CPUs; 0: cache regardless.
  double cache_max_load = -1;
};

// One row of the comparison. Ratios are horizon / llama.cpp (for RSS too; lower is better there).
struct ComparisonRow {
  std::string test;         // "decode tg128 @ d4096, 8-bit KV"
  std::string peer_config;  // "fa off / on"
  std::vector<double> peer_values;  // one per peer configuration; the best one is compared
  std::string ours_config;  // "int8"
  double ours = 0;
  double target = 0;        // the ratio horizon aims for against the peer (0: none)
  bool lower_is_better = false;
  std::string unit = "t/s";
  // Paired runs: one ratio per round (ours / the peer's best in that round). When present, ratio()
  // is their median and peer_values / ours are the medians of the rounds' values.
  std::vector<double> round_ratios;

  double peer_best() const;  // the highest value (lowest when lower_is_better); 0 when none
  double ratio() const;      // ours / peer_best() (paired: the median per-round ratio), 0 when missing
  bool meets_target() const;
};

// The aligned text table (one line per row, then a legend line).
std::string format_comparison_table(const std::vector<ComparisonRow>& rows);

// One engine invocation and what it left.
struct EngineRun {
  std::string engine;  // "llama.cpp" or "horizon"
  std::string label;   // "f16 KV, depth 4096"
  std::vector<std::string> args;  // without the executable (and, for the peer, without -m / -o)
  std::string tool;  // the peer's program: "llama-bench", or "llama-batched-bench" for depth rows
  bool cached = false;
  double wall_seconds = 0;
  uint64_t peak_rss_bytes = 0;
  double max_load = 0;  // 1-minute load average, the higher of before and after the run
  nlohmann::json output;  // llama-bench's record array, or horizon's bench engine report
  int32_t round_idx = -1;   // paired runs: the round it belongs to
};

// One paired round: the read bandwidth measured just before it and the load around it.
struct PeerRound {
  double bandwidth_gb_s = 0;
  double max_load = 0;
};

struct PeerBenchReport {
  nlohmann::json conditions;  // model digest, peer build, threads, reps, sizes
  std::vector<ComparisonRow> rows;
  std::vector<EngineRun> runs;
  std::vector<PeerRound> rounds;  // paired runs only
  nlohmann::json to_json() const;
  std::string to_text() const;  // conditions, the table, then the runs (time, RSS, cached)
};

// The 1-minute load average (/proc/loadavg), 0 when unreadable.
double load_average();

// Median of the values (0 when empty) and "min-max" of them as text.
double median_of(std::vector<double> v);

// Streaming read bandwidth of this machine in GB/s with `threads` threads over a 256 MiB buffer
// (best of three passes): the limit decode speed is bounded by, recorded next to paired figures.
double probe_read_bandwidth(int32_t threads);

using PeerProgressFn = std::function<void(const std::string&)>;

// Errors name the flag (--peer, -m) or the failing run with its command line and stderr tail.
Result<PeerBenchReport> run_peer_bench(const PeerBenchOptions& o, const PeerProgressFn& progress = nullptr);

}  // namespace hz::bench
