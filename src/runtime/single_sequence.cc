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
  SeqSlice s;
  s.tokens = tokens.data();
  s.num_tokens = static_cast<int32_t>(tokens.size());
  s.start_pos = num_tokens_;
  s.block_table = block_table_.data();
  s.all_logits = all_logits;
  model_.forward({s}, *kv_, pool_, &logits_);
  num_tokens_ += static_cast<int64_t>(tokens.size());
  return logits_;
}

const std::vector<float>& SingleSequence::append_chunked(const std::vector<int32_t>& tokens, int32_t chunk) {
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    std::vector<int32_t> part(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + chunk));
    append(part);
  }
  return logits_;
}

}  // namespace hz
