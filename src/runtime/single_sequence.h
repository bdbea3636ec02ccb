// SingleSequence: drives one sequence through a Model with its own small KV cache, step by step.
// For tests, `horizon perplexity` and other tools that need exact per-position logits without the
// scheduler. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace hz {

struct SingleSequenceOptions {
  int32_t max_tokens = 512;      // capacity in positions
  int32_t block_tokens = 16;
  DType kv_dtype = DType::kF16;               // plain f16 / f32 cache, unless kv_precision is set
  std::optional<KvPrecision> kv_precision;    // compact types and hot window
  int32_t prefill_chunk = 0;                  // tokens per forward call at most (0: no limit)
  // RAM pool in positions (0: max_tokens). With a far tier (enable_far) the context may exceed
  // it: finalized blocks move to disk as the pool fills.
  int32_t ram_tokens = 0;
};

class SingleSequence {
 public:
  SingleSequence(Model& model, ThreadPool& pool, const SingleSequenceOptions& opts);

  // Appends `tokens` (forward calls of at most prefill_chunk tokens) and returns the logits of the last token, or of every token
  // when `all_logits` ([n][vocab]).
  const std::vector<float>& append(const std::vector<int32_t>& tokens, bool all_logits = false);
  // Appends `tokens` in forward calls of at most `chunk` tokens; returns the last token's logits.
  const std::vector<float>& append_chunked(const std::vector<int32_t>& tokens, int32_t chunk);
  int64_t num_tokens() const { return num_tokens_; }
  // Positions this sequence can hold: max_tokens, or less when RAM pool + far tier are smaller.
  int64_t capacity() const;
  void reset();
  // Drops positions from `n` on (n <= num_tokens()); their blocks go back to the pool. Lets a
  // benchmark decode from the same depth again without refilling. Fails, changing nothing, when a
  // compact or mixed-precision cache already finalized a kept block that positions from `n` on
  // read exactly or in the hot type (its exact copy is gone): refill instead.
  Status truncate(int64_t n);
  // Appends `n` positions of deterministic pseudo-random K/V entries (values in [-1, 1], from
  // `seed`) without running the model: reaches a deep context in seconds for decode benchmarks.
  // Logits are not updated. Fails on a KV element type it cannot write.
  Status fill_synthetic(int64_t n, uint64_t seed = 1);
  KvCache& kv() { return *kv_; }
  // Far tier in `dir` of up to `budget_bytes` (kv/far_tier.h): lets the context grow past the RAM
  // pool (options.ram_tokens) up to max_tokens. Call before the first token.
  Status enable_far(const std::string& dir, uint64_t budget_bytes);
  const FarTier* far() const { return far_.get(); }
  // With Model::set_check_finite: the first stage whose output was not finite since the last
  // reset (none when every activation was finite, or without the check).
  const std::optional<Model::NonFinite>& non_finite() const { return non_finite_; }

 private:
  void run(const int32_t* tokens, int32_t n, bool all_logits, std::vector<float>* logits);
  // Blocks for positions [0, n): allocated, moving finalized blocks to the far tier when the pool
  // is empty. Aborts when neither has room (capacity is checked by the callers).
  void ensure_blocks(int64_t n);

  Model& model_;
  ThreadPool& pool_;
  std::unique_ptr<FarTier> far_;
  std::unique_ptr<KvCache> kv_;
  int64_t max_tokens_ = 0;
  int64_t far_cursor_ = 0;  // blocks before it are all far
  std::vector<BlockRef> block_table_;
  int64_t num_tokens_ = 0;
  std::optional<Model::NonFinite> non_finite_;
  int32_t prefill_chunk_ = 0;
  std::vector<float> logits_;
};

}  // namespace hz
