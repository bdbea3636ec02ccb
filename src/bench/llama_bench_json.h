// Reads the JSON report of llama.cpp's `llama-bench -o json` (an array of test records) into the
// fields a comparison needs. Field names as in llama-bench's test::get_fields().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace hz::bench {

struct LlamaBenchRecord {
  std::string build_commit;
  int64_t build_number = 0;
  std::string model_filename;
  int64_t n_threads = 0;
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::string type_k, type_v;  // "f16", "q8_0", ...
  int32_t flash_attn = 0;      // llama_flash_attn_type: -1 auto, 0 off, 1 on
  std::vector<double> samples_ts;  // tokens/s of each repetition
  double avg_ts = 0;

  double median_ts() const;  // median of samples_ts (avg_ts when there are none)
  // "pp512", "tg128", "tg128@d4096", "pp512@d4096" as in llama-bench's own table.
  std::string test_name() const;
};

// llama-batched-bench's `--output-format jsonl` lines (one per prompt/generation/parallel case) as
// llama-bench-shaped records: a case of pp prompt tokens and tg generated ones becomes decode
// "tg<tg>@d<pp>" at the tokens/s of its generation phase (speed_tg; pl sequences together when
// pl > 1). The K/V types are not in its output, so the caller passes the ones it asked for. Other
// lines of the output are skipped; errors name the line and the field.
Result<nlohmann::json> batched_bench_records(const std::string& text, const std::string& type_k,
                                             const std::string& type_v);

// Errors name the record index and the missing or mistyped field.
Result<std::vector<LlamaBenchRecord>> parse_llama_bench_json(const nlohmann::json& j);
Result<std::vector<LlamaBenchRecord>> parse_llama_bench_json(const std::string& text);

}  // namespace hz::bench
