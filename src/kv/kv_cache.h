// KvCache: the storage of the paged KV cache — a pool of fixed-size blocks, each holding K and V
// of `block_tokens` positions for every layer — plus the BlockPool that hands them out.
// Sequences own block tables (vectors of block ids); position p of a sequence lives in block
// table[p / block_tokens] at slot p % block_tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/block_pool.h"
#include "tensor/dtype.h"

namespace hz {

struct KvCacheConfig {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 16;  // positions per block (16..256, a multiple of 16)
  DType dtype = DType::kF16;  // element type: kF32 or kF16
  int32_t num_blocks = 0;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& cfg);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheConfig& config() const { return cfg_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // Bytes of K (or V) of one layer in one block: [num_kv_heads][block_tokens][head_dim] elements.
  uint64_t layer_half_bytes() const { return layer_half_bytes_; }
  uint64_t block_bytes() const { return 2 * layer_half_bytes_ * cfg_.num_layers; }
  uint64_t total_bytes() const { return block_bytes() * cfg_.num_blocks; }
  // Bytes of one head's row of one position.
  uint64_t row_bytes() const { return row_bytes_; }

  // Start of K (V) of `layer` in `block_idx`; head h, slot s is at + (h * block_tokens + s) * row_bytes().
  uint8_t* k_data(int32_t block_idx, int32_t layer) { return base(block_idx, layer); }
  uint8_t* v_data(int32_t block_idx, int32_t layer) { return base(block_idx, layer) + layer_half_bytes_; }
  const uint8_t* k_data(int32_t block_idx, int32_t layer) const { return const_cast<KvCache*>(this)->k_data(block_idx, layer); }
  const uint8_t* v_data(int32_t block_idx, int32_t layer) const { return const_cast<KvCache*>(this)->v_data(block_idx, layer); }

  // Blocks needed to hold `num_tokens` positions.
  int32_t blocks_for(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + cfg_.block_tokens - 1) / cfg_.block_tokens);
  }

 private:
  uint8_t* base(int32_t block_idx, int32_t layer) {
    return storage_.get() + static_cast<uint64_t>(block_idx) * block_bytes() + 2 * layer_half_bytes_ * layer;
  }

  KvCacheConfig cfg_;
  BlockPool pool_;
  uint64_t row_bytes_ = 0;
  uint64_t layer_half_bytes_ = 0;
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, FreeDeleter> storage_;  // [num_blocks][num_layers][K, V][num_kv_heads][block_tokens][head_dim]
};

}  // namespace hz
