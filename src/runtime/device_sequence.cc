#include "runtime/device_sequence.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "base/check.h"
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
  const int64_t width = c.codec == kernels::KvCodec::kF32 ? 4 : 2;
  const int64_t row_bytes = static_cast<int64_t>(c.head_dim) * width;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Whole blocks at a time: a block's K and V planes of every layer, rows [slot0, slot1) of each head.
  std::vector<uint8_t> plane;
  for (int64_t p = num_tokens_; p < end;) {
    const int64_t b = p / c.block_tokens, slot0 = p % c.block_tokens;
    const int64_t slot1 = std::min<int64_t>(c.block_tokens, slot0 + (end - p));
    const int32_t blk = block_table_[b].idx;
    auto fill_rows = [&](uint8_t* dst, int64_t rows) {
      for (int64_t i = 0; i < rows * c.head_dim; ++i) {
        const float v = dist(rng);
        if (c.codec == kernels::KvCodec::kF32) {
          std::memcpy(dst + 4 * i, &v, 4);
        } else {
          const uint16_t h16 = c.codec == kernels::KvCodec::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
          std::memcpy(dst + 2 * i, &h16, 2);
        }
      }
    };
    if (slot0 == 0 && slot1 == c.block_tokens) {
      // A whole block (f32/f16/bf16 planes have no scales): every layer's K and V planes in one upload.
      plane.resize(arena_->block_bytes());
      fill_rows(plane.data(), static_cast<int64_t>(plane.size()) / row_bytes);
      HZ_RETURN_IF_ERROR(backend_.upload(arena_->data() + static_cast<uint64_t>(blk) * arena_->block_bytes(), plane.data(),
                                         plane.size()));
      HZ_RETURN_IF_ERROR(backend_.synchronize());  // `plane` is reused
    } else {
      const device::DeviceKvBlock d = arena_->descriptor(blk);
      for (int32_t l = 0; l < c.num_layers; ++l) {
        const uint64_t lo = static_cast<uint64_t>(arena_->geometry().layer_offset(l));
        for (uint64_t base : {d.k_elems, d.v_elems}) {
          for (int32_t h = 0; h < c.num_kv_heads; ++h) {
            const int64_t first = static_cast<int64_t>(h) * c.block_tokens + slot0;
            const int64_t rows = slot1 - slot0;
            plane.resize(static_cast<size_t>(rows * row_bytes));
            fill_rows(plane.data(), rows);
            HZ_RETURN_IF_ERROR(backend_.upload(arena_->data() + base + lo + first * row_bytes, plane.data(), plane.size()));
            HZ_RETURN_IF_ERROR(backend_.synchronize());
          }
        }
      }
    }
    p += slot1 - slot0;
  }
  num_tokens_ = end;
  return Status();
}

}  // namespace hz
