// `horizon bench spec`: decode speed with speculative decoding against plain decoding, paired: the
// same greedy request alternates between a plain engine and a speculating one, round after round,
// and the figure is the median of the per-round ratios. The drafter is prompt lookup (ngram), or
// an oracle that proposes the true greedy continuation with a fixed share of its tokens made wrong
// (the cost of verification alone, whatever a real drafter would guess). Every speculative run
// must reproduce the plain output token for token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/stats.h"
#include "runtime/engine_options.h"

namespace hz::bench {

struct SpecBenchOptions {
  EngineOptions engine;           // model, threads, KV; spec fields: the speculating engine's
  std::string drafter = "ngram";  // ngram or oracle
  std::string prompt;             // text; empty: prompt_tokens pseudo-random token ids
  int32_t prompt_tokens = 64;
  int32_t gen_tokens = 128;
  double fail_rate = 0.2;         // oracle: share of drafted tokens made wrong
  int32_t rounds = 5;
  int32_t reps = 3;               // runs per engine in a round (short runs are noisy)
  uint64_t seed = 1;
};

struct SpecBenchRound {
  double plain_tps = 0, spec_tps = 0;  // decode tokens/s (first to last token), over the round's runs
  double ratio = 0;
  uint64_t drafted = 0, accepted = 0;
};

struct SpecBenchReport {
  int64_t prompt_tokens = 0, gen_tokens = 0;
  std::vector<SpecBenchRound> rounds;
  Summary ratio;
  double acceptance = 0;         // accepted / drafted over all rounds
  bool identical = true;         // every speculative output equalled the plain one
  std::string to_text() const;
};

using SpecProgressFn = std::function<void(const std::string&)>;

Result<SpecBenchReport> run_spec_bench(const SpecBenchOptions& o, const SpecProgressFn& progress = nullptr);

}  // namespace hz::bench
