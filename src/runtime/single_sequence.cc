#include "runtime/single_sequence.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kernels/kernels.h"

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
  max_tokens_ = opts.max_tokens;
  const int32_t ram = opts.ram_tokens > 0 ? std::min(opts.ram_tokens, opts.max_tokens) : opts.max_tokens;
  kc.num_blocks = (ram + opts.block_tokens - 1) / opts.block_tokens;
  kv_ = std::make_unique<KvCache>(kc);
}

Status SingleSequence::enable_far(const std::string& dir, uint64_t budget_bytes) {
  HZ_CHECK(num_tokens_ == 0 && far_ == nullptr);
  FarTierOptions fo;
  fo.dir = dir;
  fo.budget_bytes = budget_bytes;
  fo.num_layers = kv_->config().num_layers;
  fo.layer_bytes = kv_->layer_bytes();
  fo.segments = kv_->far_segments();
  HZ_ASSIGN_OR_RETURN(far_, FarTier::open(fo));
  kv_->attach_far(far_.get());
  return Status();
}

int64_t SingleSequence::capacity() const {
  const int64_t blocks = kv_->config().num_blocks + (far_ ? far_->capacity() : 0);
  return std::min<int64_t>(max_tokens_, blocks * kv_->config().block_tokens);
}

void SingleSequence::ensure_blocks(int64_t n) {
  const int32_t need = kv_->blocks_for(n);
  BlockPool& pool = kv_->pool();
  while (static_cast<int32_t>(block_table_.size()) < need) {
    if (pool.num_allocatable() == 0) {
      // The oldest finalized block still in RAM goes to disk.
      bool moved = false;
      const int64_t fin = std::min<int64_t>(kv_->finalized_blocks(num_tokens_), static_cast<int64_t>(block_table_.size()));
      // Sink blocks stay: every later query reads them hot.
      for (int64_t j = std::max<int64_t>(far_cursor_, kv_->sink_blocks()); j < fin && !moved; ++j) {
        if (block_table_[j].is_far()) continue;
        const int32_t b = block_table_[j].idx;
        auto id = kv_->spill(b);
        HZ_CHECK_MSG(id.has_value(), "SingleSequence: the far tier cannot take more blocks");
        pool.unref(b);
        block_table_[j] = BlockRef::far(*id);
        far_cursor_ = j + 1;
        moved = true;
      }
      HZ_CHECK_MSG(moved, "SingleSequence capacity exceeded: the RAM pool is too small for one step");
    }
    block_table_.push_back(BlockRef::pool(*pool.allocate()));
  }
}

void SingleSequence::reset() {
  for (BlockRef b : block_table_) kv_->release_block(b);
  far_cursor_ = 0;
  block_table_.clear();
  num_tokens_ = 0;
  non_finite_.reset();
}

Status SingleSequence::truncate(int64_t n) {
  HZ_CHECK(n >= 0 && n <= num_tokens_);
  const int32_t keep = kv_->blocks_for(n);
  if (n < num_tokens_) {
    for (int32_t bi = 0; bi < keep; ++bi) {
      const BlockRef b = block_table_[bi];
      // A far block is final (read cold only); so must be every kept block a later query reads
      // otherwise — and the partly kept block is written again.
      const bool rewritten = bi == keep - 1 && n % kv_->config().block_tokens != 0;
      const bool cold = kv_->read_form(n, bi) == KvRead::kCold;
      const bool needs_exact = kv_->staged() && !cold && (b.is_far() || !kv_->has_staging(b.idx));
      if ((b.is_far() && (rewritten || !cold)) || needs_exact) {
        return make_error(StatusCode::kUnimplemented, "cannot truncate to {} positions: block {} was already finalized", n, bi);
      }
    }
    // The partly kept block is written again from slot n % block_tokens on.
    if (n % kv_->config().block_tokens != 0) HZ_CHECK(kv_->reopen_block(block_table_[keep - 1]));
  }
  while (static_cast<int32_t>(block_table_.size()) > keep) {
    kv_->release_block(block_table_.back());
    block_table_.pop_back();
  }
  far_cursor_ = std::min<int64_t>(far_cursor_, keep);
  num_tokens_ = n;
  if (non_finite_ && non_finite_->position >= n) non_finite_.reset();
  return Status::ok_status();
}

Status SingleSequence::fill_synthetic(int64_t n, uint64_t seed) {
  const KvCacheConfig& c = kv_->config();
  if (n < 0) return invalid_argument("synthetic KV fill of {} positions", n);
  if (num_tokens_ + n > capacity()) {
    return invalid_argument("synthetic KV fill to {} positions exceeds the capacity of {}", num_tokens_ + n, capacity());
  }
  // One row of f32 values per (position, layer, K/V, head), from a position-keyed generator so
  // the content does not depend on the thread count.
  auto fill = [&](int64_t first, int64_t count) {
    pool_.parallel_range(count, [&](int64_t begin, int64_t end, int) {
      std::vector<float> row(c.head_dim);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t pos = first + i;
        const BlockRef block = block_table_[pos / c.block_tokens];
        const int32_t slot = static_cast<int32_t>(pos % c.block_tokens);
        uint64_t x = (seed + 0x9E3779B97F4A7C15ull) * (static_cast<uint64_t>(pos) * 2 + 1) | 1;
        for (int32_t layer = 0; layer < c.num_layers; ++layer) {
          for (int half = 0; half < 2; ++half) {
            for (int32_t h = 0; h < c.num_kv_heads; ++h) {
              for (float& v : row) {
                x ^= x << 13;  // xorshift64
                x ^= x >> 7;
                x ^= x << 17;
                v = static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) * (1.0f / (1 << 23));
              }
              // The block's row storage exists already (see below): plain address arithmetic,
              // safe from worker threads.
              uint8_t* dst = kv_->write_row(block, layer, half, h, slot);
              if (kv_->exact_codec() == kernels::KvCodec::kF32) {
                std::memcpy(dst, row.data(), row.size() * sizeof(float));
              } else {
                kernels::f32_to_f16_row(row.data(), reinterpret_cast<uint16_t*>(dst), c.head_dim);
              }
            }
          }
        }
      }
    });
  };
  const int64_t end = num_tokens_ + n;
  if (!kv_->staged()) {
    // A few blocks at a time (at most half the pool), so a far tier can take the finished ones as
    // the pool fills.
    const int64_t step = std::clamp<int64_t>(c.num_blocks / 2, 1, 64);
    while (num_tokens_ < end) {
      const int64_t stop = std::min<int64_t>(end, (num_tokens_ / c.block_tokens + step) * c.block_tokens);
      ensure_blocks(stop);
      fill(num_tokens_, stop - num_tokens_);
      num_tokens_ = stop;
    }
    return Status();
  }
  // Compact types: rows go to a block's staging copy like a forward pass writes them, one block at
  // a time (so at most a block plus the hot window is staged), then the same commit() encodes the
  // blocks no later query reads exactly or hot.
  while (num_tokens_ < end) {
    const int64_t stop = std::min<int64_t>(end, (num_tokens_ / c.block_tokens + 1) * c.block_tokens);
    ensure_blocks(stop);
    kv_->write_row(block_table_[num_tokens_ / c.block_tokens], 0, 0, 0, 0);  // creates the staging copy
    fill(num_tokens_, stop - num_tokens_);
    num_tokens_ = stop;
    for (int32_t l = 0; l < c.num_layers; ++l) kv_->seal_layer(l, block_table_.data(), num_tokens_ - 1, num_tokens_);
    kv_->commit(block_table_.data(), num_tokens_);
  }
  return Status();
}

const std::vector<float>& SingleSequence::append(const std::vector<int32_t>& tokens, bool all_logits) {
  HZ_CHECK_MSG(num_tokens_ + static_cast<int64_t>(tokens.size()) <= capacity(), "SingleSequence capacity exceeded");
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
  ensure_blocks(num_tokens_ + n);
  SeqSlice s;
  s.tokens = tokens;
  s.num_tokens = n;
  s.start_pos = num_tokens_;
  s.block_table = block_table_.data();
  s.all_logits = all_logits;
  model_.forward({s}, *kv_, pool_, logits);
  if (!non_finite_ && model_.check_finite() && !model_.non_finite().empty() && model_.non_finite()[0])
    non_finite_ = model_.non_finite()[0];
  // Never served: a far block that failed its checksum (a disk fault) stops the tool here.
  if (far_) HZ_CHECK_MSG(far_->take_corrupt().empty(), "KV far tier: a block read back from disk failed its checksum");
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
