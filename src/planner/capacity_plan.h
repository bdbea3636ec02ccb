// The capacity plan: given a model shape and a memory budget, what the weights, KV cache and
// runtime take, the largest context per sequence at each concurrency and KV type, whether a
// requested setting fits, and if not the remedies in order. Pure functions; the server uses the
// same plan at start-up and for admission.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "kv/kv_layout.h"
#include "model/model_shape.h"
#include "planner/weight_bytes.h"

namespace hz {

struct PlanOptions {
  uint64_t memory_bytes = 0;                 // the budget (the caller defaults it to available RAM)
  std::optional<DType> weight_type;          // nullopt: the GGUF's real bytes, or config.json's torch_dtype (bf16)
  KvPrecision kv;                            // requested KV type (and mixed-precision window)
  uint64_t max_num_seqs = 1;
  uint64_t max_model_len = 0;                // 0: the model's max positions (4096 when unknown)
  uint64_t block_tokens = 16;
  uint64_t prefill_chunk_tokens = 512;
  uint64_t num_threads = 8;
  std::vector<uint64_t> concurrencies = {1, 4, 8, 16};
};

// Memory the engine needs besides weights and KV. Estimates, sized generously.
struct RuntimeOverhead {
  uint64_t activations = 0;     // f32 buffers of one prefill chunk through one layer
  uint64_t logits = 0;          // one f32 row of vocab per sequence in a decode step
  uint64_t thread_buffers = 0;  // per-thread scratch: attention tiles, quantized activation rows
  uint64_t base = 0;            // code, tokenizer, allocator slack
  // Compact KV types and hot windows (KvCache): f16 (f32) staging copies of the blocks still read
  // exactly or hot, and the cold-type arena copy of the hot window's blocks, beyond the KV figure.
  uint64_t kv_staging = 0;
  uint64_t total() const { return activations + logits + thread_buffers + base + kv_staging; }
};
// The kv_staging term: per sequence its hot window's blocks and the block being written, plus
// the blocks one prefill chunk spans, at the exact type; with a window, the arena's cold copy of
// the window minus the hot bytes the KV figure already counts for it. 0 for plain f16 / f32.
uint64_t kv_staging_bytes(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t prefill_chunk_tokens,
                          uint64_t num_seqs);
// RAM the disk tier's far blocks (kv/far_tier.h) take while attention reads them: one layer's K and
// V planes of every block of `context_tokens` that is not in the `ram_tokens` of RAM KV, resident
// during that layer's attention and unmapped after. Zero when everything fits in RAM.
uint64_t kv_far_window_bytes(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t context_tokens,
                             uint64_t ram_tokens);
RuntimeOverhead runtime_overhead(const ModelShape& s, const PlanOptions& o, uint64_t num_seqs);

// Largest context per sequence (a whole number of blocks) for `num_seqs` sequences, given the
// bytes left for KV; 0 when not even one block fits.
uint64_t max_tokens_per_seq(const KvGeometry& g, const KvPrecision& p, uint64_t block_tokens, uint64_t kv_budget,
                            uint64_t num_seqs);

struct MaxContextCell {
  uint64_t concurrency = 0;
  uint64_t max_tokens = 0;       // capped at the model's limit
  bool limited_by_model = false; // memory allows more than the model's context
};
struct MaxContextRow {
  std::string kv;                // kv_precision_name
  std::vector<MaxContextCell> cells;
};

struct Remedy {
  std::string kind;   // shorter_context, quantized_kv, mixed_precision_window, cold_tier, fewer_sequences, smaller_weights
  std::string flags;  // the command-line change, e.g. "--max-model-len 32768"
  bool fits = false;  // the requested setting fits with this change alone
  uint64_t value = 0; // the figure: tokens, sequences, or bytes (cold tier: bytes on disk)
  std::string text;   // one line for people
};

struct PlanReport {
  ModelShape shape;
  PlanOptions options;
  ParamCounts params;
  std::string weight_type;                // what weights_bytes refers to: "q4_0", "file (q4_0)", ...
  uint64_t weights_bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> weights_bytes_by_type;
  std::vector<std::pair<std::string, double>> kv_bytes_per_token;  // per KV type, at options.block_tokens
  double requested_kv_bytes_per_token = 0;
  RuntimeOverhead overhead;               // at options.max_num_seqs
  uint64_t context_limit = 0;             // the model's max positions (0: unknown)
  std::vector<MaxContextRow> max_context; // each KV type (+ the requested mix), each concurrency
  // The requested setting.
  uint64_t requested_context = 0;
  uint64_t requested_kv_bytes = 0;        // all sequences at requested_context
  uint64_t required_bytes = 0;            // weights + overhead + requested KV
  bool fits = false;
  std::vector<Remedy> remedies;           // empty when it fits
};

Result<PlanReport> make_plan(const ModelShape& s, const PlanOptions& o);

// Start-up check for the server: weights + runtime + one sequence of `max_model_len` must fit.
Status check_startup_fits(const PlanReport& r);

nlohmann::ordered_json plan_to_json(const PlanReport& r);
std::string plan_to_text(const PlanReport& r);

}  // namespace hz
