#include "runtime/device_sequence.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "base/check.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace hz {

Result<std::unique_ptr<DeviceSequence>> DeviceSequence::create(DeviceModel& model, cuda::Backend& backend,
                                                                const DeviceSequenceOptions& opts) {
  if (opts.max_tokens < 1) return invalid_argument("DeviceSequence: max_tokens must be at least 1");
  const ModelConfig& c = model.config();
  DeviceKvArenaConfig ac;
  ac.num_layers = c.num_layers;
  ac.num_kv_heads = c.num_kv_heads;
  ac.head_dim = c.head_dim;
  ac.block_tokens = opts.block_tokens;
  ac.num_blocks = (opts.max_tokens + opts.block_tokens - 1) / opts.block_tokens;
  ac.codec = opts.kv_codec;
  ac.rotated_k = opts.kv_rotated_k;
  ac.rotated_v = opts.kv_rotated_v;
  std::unique_ptr<DeviceSequence> s(new DeviceSequence(model, backend));
  HZ_ASSIGN_OR_RETURN(s->arena_, DeviceKvArena::create(ac, backend));
  s->prefill_chunk_ = opts.prefill_chunk;
  return s;
}

void DeviceSequence::ensure_blocks(int64_t n) {
  const int32_t need = arena_->blocks_for(n);
  while (static_cast<int32_t>(block_table_.size()) < need) block_table_.push_back(BlockRef::pool(*arena_->pool().allocate()));
}

Result<const std::vector<float>*> DeviceSequence::append(const std::vector<int32_t>& tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (num_tokens_ + n > capacity())
    return out_of_range("DeviceSequence: {} + {} tokens is more than its {} positions", num_tokens_, n, capacity());
  const int64_t chunk = prefill_chunk_ > 0 ? prefill_chunk_ : std::max<int64_t>(n, 1);
  std::vector<float> all;
  for (int64_t i = 0; i < n; i += chunk) {
    const int32_t len = static_cast<int32_t>(std::min(chunk, n - i));
    ensure_blocks(num_tokens_ + len);
    SeqSlice s;
    s.tokens = tokens.data() + i;
    s.num_tokens = len;
    s.start_pos = num_tokens_;
    s.block_table = block_table_.data();
    s.all_logits = all_logits;
    HZ_RETURN_IF_ERROR(model_.forward({s}, *arena_, &logits_));
    num_tokens_ += len;
    if (all_logits && n > chunk) all.insert(all.end(), logits_.begin(), logits_.end());
  }
  if (all_logits && n > chunk) logits_.swap(all);
  return &logits_;
}

void DeviceSequence::truncate(int64_t n) {
  HZ_CHECK(n >= 0 && n <= num_tokens_);
  const int32_t keep = arena_->blocks_for(n);
  while (static_cast<int32_t>(block_table_.size()) > keep) {
    arena_->pool().unref(block_table_.back().idx);
    block_table_.pop_back();
  }
  num_tokens_ = n;
}

Status DeviceSequence::fill_synthetic(int64_t n, uint64_t seed) {
  if (num_tokens_ + n > capacity())
    return out_of_range("DeviceSequence: {} + {} synthetic positions is more than its {} positions", num_tokens_, n, capacity());
  const DeviceKvArenaConfig& c = arena_->config();
  const int64_t end = num_tokens_ + n;
  ensure_blocks(end);
  const int64_t reb = kernels::kv_row_elem_bytes(c.codec, c.head_dim);
  const int64_t rsb = device::arena_row_scale_bytes(c.codec, c.head_dim);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(c.head_dim));
  std::vector<uint8_t> block(arena_->block_bytes());
  // Block by block: its bytes (downloaded when earlier rows of it are kept), the new rows of every
  // layer, stream and head encoded as kv_write encodes them, then one upload.
  for (int64_t p = num_tokens_; p < end;) {
    const int64_t b = p / c.block_tokens, slot0 = p % c.block_tokens;
    const int64_t slot1 = std::min<int64_t>(c.block_tokens, slot0 + (end - p));
    const int32_t blk = block_table_[b].idx;
    uint8_t* dev = arena_->data() + static_cast<uint64_t>(blk) * arena_->block_bytes();
    if (slot0 > 0) {
      HZ_RETURN_IF_ERROR(backend_.download(block.data(), dev, block.size()));
    } else {
      std::fill(block.begin(), block.end(), uint8_t{0});
    }
    const device::DeviceKvBlock d = device::arena_block_descriptor(arena_->geometry(), 0);  // offsets within a block
    for (int32_t l = 0; l < c.num_layers; ++l) {
      const uint64_t lo = static_cast<uint64_t>(arena_->geometry().layer_offset(l));
      for (int st = 0; st < 2; ++st) {
        for (int32_t h = 0; h < c.num_kv_heads; ++h) {
          for (int64_t s = slot0; s < slot1; ++s) {
            for (auto& v : row) v = dist(rng);
            const int64_t r = static_cast<int64_t>(h) * c.block_tokens + s;
            uint8_t* elems = block.data() + (st == 0 ? d.k_elems : d.v_elems) + lo + r * reb;
            uint8_t* scales = block.data() + (st == 0 ? d.k_scales : d.v_scales) + lo + r * rsb;
            kernels::encode_kv_rows(c.codec, row.data(), 1, c.head_dim, elems, scales);
          }
        }
      }
    }
    HZ_RETURN_IF_ERROR(backend_.upload(dev, block.data(), block.size()));
    HZ_RETURN_IF_ERROR(backend_.synchronize());  // `block` is reused
    p += slot1 - slot0;
  }
  num_tokens_ = end;
  return Status();
}

}  // namespace hz
