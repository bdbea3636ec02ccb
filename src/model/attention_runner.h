// AttentionRunner: the attention of one layer for a batch of query tokens, spread over a thread
// pool. One task per (token, KV head) computes the whole GQA group of query heads; when there are
// few such tasks for the threads (decode, short prefill), each one's key range is split along its
// super-segments across threads and the partials are merged in position order (flash-decoding).
// Split or not, the merge tree is the same (model/attention.h), so the output bits do not depend on
// the thread count or on the split.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_read_table.h"
#include "model/attention.h"

namespace hz {

// One query token: its sequence's read table (bound to the layer) and its position.
struct AttnQueryRow {
  const KvReadTable* table = nullptr;
  int64_t pos = 0;
};

// One layer's attention over a batch: q and out are [num_tokens][num_heads * head_dim].
struct AttnJob {
  int32_t head_dim = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  float q_scale = 1.0f;   // applied to q before the dot products
  int64_t window = 0;     // sliding window (0: full causal)
  const float* q = nullptr;
  float* out = nullptr;
  const AttnQueryRow* rows = nullptr;
  int64_t num_tokens = 0;
};

// kAuto splits when (token, KV head) tasks are few for the threads; tests force either path.
enum class AttnSplit { kAuto, kNever, kAlways };

class AttentionRunner {
 public:
  void set_split(AttnSplit s) { split_ = s; }
  AttnSplit split() const { return split_; }
  void run(const AttnJob& job, ThreadPool& pool);
  // Whether the last run() split key ranges (tests).
  bool last_split() const { return last_split_; }

 private:
  // serial: the job is too small to hand out; it runs on the calling thread alone.
  void run_unsplit(const AttnJob& job, ThreadPool& pool, bool serial);
  void run_split(const AttnJob& job, ThreadPool& pool, int64_t chunk);

  struct Task {
    int64_t unit;     // token * num_kv_heads + kv head
    int64_t s_begin;  // super-segments [s_begin, s_end) of that unit's range
    int64_t s_end;
  };
  AttnSplit split_ = AttnSplit::kAuto;
  bool last_split_ = false;
  std::vector<AttnScratch> scratch_;  // per thread
  std::vector<Task> tasks_;
  std::vector<int64_t> unit_first_;   // per unit: its first super-segment index
  std::vector<int64_t> unit_offset_;  // per unit: index of its first partial in partials_
  std::vector<float> partials_;       // O(depth / kSuperTokens) partials per unit
  std::vector<std::pair<int64_t, int64_t>> blocks_;  // query blocks [first, last) of the unsplit path
};

}  // namespace hz
