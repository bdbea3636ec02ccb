#include "kv/kv_cache.h"

#include <cstdlib>

#include "base/check.h"

namespace hz {

KvCache::KvCache(const KvCacheConfig& cfg) : cfg_(cfg), pool_(cfg.num_blocks) {
  HZ_CHECK(cfg.dtype == DType::kF32 || cfg.dtype == DType::kF16);
  HZ_CHECK(cfg.block_tokens >= 16 && cfg.block_tokens % 16 == 0);
  row_bytes_ = hz::row_bytes(cfg.dtype, cfg.head_dim);
  layer_half_bytes_ = row_bytes_ * cfg.block_tokens * cfg.num_kv_heads;
  // calloc: never-written slots read as zeros, and large pools are mapped lazily (pages are
  // committed as blocks are first written, so RSS follows use, not the budget).
  storage_.reset(static_cast<uint8_t*>(std::calloc(total_bytes() > 0 ? total_bytes() : 1, 1)));
  HZ_CHECK_MSG(storage_ != nullptr, "KV cache allocation failed");
}

void KvCache::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

}  // namespace hz
