// DeviceSequence: one sequence driven through a DeviceModel with its own device KV arena, step by
// step, without the scheduler: the GPU counterpart of SingleSequence for tests, `bench engine
// --device cuda` and the device check. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "kv/device_kv_arena.h"
#include "model/device_model.h"

namespace hz {

struct DeviceSequenceOptions {
  int32_t max_tokens = 512;  // capacity in positions
  int32_t block_tokens = 16;
  kernels::KvCodec kv_codec = kernels::KvCodec::kF16;  // f32, f16, bf16, fp8, int8 or int4
  bool kv_rotated_k = false;  // K / V rows stored rotated (DeviceKvArenaConfig)
  bool kv_rotated_v = false;
  int32_t prefill_chunk = 0;  // tokens per forward call at most (0: no limit)
};

class DeviceSequence {
 public:
  // `model` and `backend` must outlive the sequence.
  static Result<std::unique_ptr<DeviceSequence>> create(DeviceModel& model, cuda::Backend& backend,
                                                        const DeviceSequenceOptions& opts);

  // Appends `tokens` (forward calls of at most prefill_chunk tokens) and returns the logits of the
  // last token, or of every token when `all_logits` ([n][vocab]). Errors: past the capacity, a
  // device failure.
  Result<const std::vector<float>*> append(const std::vector<int32_t>& tokens, bool all_logits = false);
  int64_t num_tokens() const { return num_tokens_; }
  int64_t capacity() const { return static_cast<int64_t>(arena_->config().num_blocks) * arena_->config().block_tokens; }
  // Drops positions from `n` on; their blocks go back to the pool (rows are rewritten in place).
  void truncate(int64_t n);
  // Appends `n` positions of deterministic pseudo-random K/V rows (values in [-1, 1), from `seed`)
  // without running the model: a deep context in seconds for decode benchmarks. Logits unchanged.
  // Each row is synthetic_kv_row's, encoded as kv_write encodes; blocks are made on all cores.
  Status fill_synthetic(int64_t n, uint64_t seed = 1);
  // The synthetic row of (layer, stream 0 = K / 1 = V, KV head, position) for `seed`: a
  // counter-based hash of those, so any row can be made again alone.
  static void synthetic_kv_row(uint64_t seed, int32_t layer, int32_t stream, int32_t head, int64_t pos, int32_t head_dim,
                               float* row);

  // One layer's attention over a wholly synthetic sequence (fill_synthetic from position 0 with
  // `seed`), checked on the host: a seeded random query at the last position against every key,
  // on the device (cuda paged attention over this sequence's blocks), and in double precision from
  // the rows made again and put through the scalar codec. Deep contexts: offsets past 32 bits
  // cannot hide behind noise. Errors: the sequence holds model-written rows, or a device failure.
  struct AttentionCheck {
    int32_t layer = 0;
    int64_t depth = 0;
    double max_abs_diff = 0;  // max |device - reference| over the query's heads and dims
    double max_abs_ref = 0;   // max |reference|
    bool ok() const { return max_abs_diff <= 2e-3 * max_abs_ref + 1e-5; }
  };
  Result<AttentionCheck> check_synthetic_attention(int32_t layer, uint64_t query_seed = 99) const;
  DeviceKvArena& arena() { return *arena_; }

 private:
  DeviceSequence(DeviceModel& model, cuda::Backend& backend) : model_(model), backend_(backend) {}
  void ensure_blocks(int64_t n);

  DeviceModel& model_;
  cuda::Backend& backend_;
  std::unique_ptr<DeviceKvArena> arena_;
  int32_t prefill_chunk_ = 0;
  std::vector<BlockRef> block_table_;
  int64_t num_tokens_ = 0;
  std::vector<float> logits_;
  std::optional<uint64_t> synthetic_seed_;  // set while every row is fill_synthetic's (from position 0)
};

}  // namespace hz
