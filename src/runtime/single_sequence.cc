#include "runtime/single_sequence.h"

#include <algorithm>

#include "base/check.h"

namespace hz {

SingleSequence::SingleSequence(Model& model, ThreadPool& pool, const SingleSequenceOptions& opts)
    : model_(model), pool_(pool) {
  const ModelConfig& c = model.config();
  KvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_tokens = opts.block_tokens;
  kc.dtype = opts.kv_dtype;
  kc.precision = opts.kv_precision;
  prefill_chunk_ = opts.prefill_chunk;
  kc.num_blocks = (opts.max_tokens + opts.block_tokens - 1) / opts.block_tokens;
  kv_ = std::make_unique<KvCache>(kc);
}

void SingleSequence::reset() {
  for (int32_t b : block_table_) kv_->pool().unref(b);
  block_table_.clear();
  num_tokens_ = 0;
}

const std::vector<float>& SingleSequence::append(const std::vector<int32_t>& tokens, bool all_logits) {
  const int32_t need = kv_->blocks_for(num_tokens_ + static_cast<int64_t>(tokens.size()));
  HZ_CHECK_MSG(need <= kv_->config().num_blocks, "SingleSequence capacity exceeded");
  while (static_cast<int32_t>(block_table_.size()) < need) block_table_.push_back(*kv_->pool().allocate());
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t chunk = prefill_chunk_ > 0 ? prefill_chunk_ : std::max<int64_t>(n, 1);
  if (n <= chunk) {
    run(tokens.data(), static_cast<int32_t>(n), all_logits, &logits_);
    return logits_;
  }
  // Several forward calls (results are chunk-invariant); all_logits concatenates their rows.
  std::vector<float> all;
  for (int64_t i = 0; i < n; i += chunk) {
    run(tokens.data() + i, static_cast<int32_t>(std::min(chunk, n - i)), all_logits, &logits_);
    if (all_logits) all.insert(all.end(), logits_.begin(), logits_.end());
  }
  if (all_logits) logits_.swap(all);
  return logits_;
}

void SingleSequence::run(const int32_t* tokens, int32_t n, bool all_logits, std::vector<float>* logits) {
  SeqSlice s;
  s.tokens = tokens;
  s.num_tokens = n;
  s.start_pos = num_tokens_;
  s.block_table = block_table_.data();
  s.all_logits = all_logits;
  model_.forward({s}, *kv_, pool_, logits);
  num_tokens_ += n;
}

const std::vector<float>& SingleSequence::append_chunked(const std::vector<int32_t>& tokens, int32_t chunk) {
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    std::vector<int32_t> part(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + chunk));
    append(part);
  }
  return logits_;
}

}  // namespace hz
