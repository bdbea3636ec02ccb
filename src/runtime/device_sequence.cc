#include "runtime/device_sequence.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <thread>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/cuda/launch_checks.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "model/attention.h"
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
  synthetic_seed_.reset();  // model-written rows from here on
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
  if (n == 0) synthetic_seed_.reset();
  const int32_t keep = arena_->blocks_for(n);
  while (static_cast<int32_t>(block_table_.size()) > keep) {
    arena_->pool().unref(block_table_.back().idx);
    block_table_.pop_back();
  }
  num_tokens_ = n;
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void DeviceSequence::synthetic_kv_row(uint64_t seed, int32_t layer, int32_t stream, int32_t head, int64_t pos,
                                      int32_t head_dim, float* row) {
  const uint64_t stream_key = (static_cast<uint64_t>(layer) * 2 + static_cast<uint64_t>(stream)) << 20 | static_cast<uint64_t>(head);
  const uint64_t key = splitmix64(splitmix64(seed ^ splitmix64(stream_key)) ^ static_cast<uint64_t>(pos));
  for (int32_t i = 0; i < head_dim; ++i) {
    const uint64_t x = splitmix64(key + static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull);
    row[i] = static_cast<float>(x >> 40) * (2.0f / 16777216.0f) - 1.0f;  // 24 bits: exact, in [-1, 1)
  }
}

Status DeviceSequence::fill_synthetic(int64_t n, uint64_t seed) {
  if (num_tokens_ + n > capacity())
    return out_of_range("DeviceSequence: {} + {} synthetic positions is more than its {} positions", num_tokens_, n, capacity());
  if (n <= 0) return Status();
  const DeviceKvArenaConfig& c = arena_->config();
  const int64_t end = num_tokens_ + n;
  ensure_blocks(end);
  const int64_t reb = kernels::kv_row_elem_bytes(c.codec, c.head_dim);
  const int64_t rsb = device::arena_row_scale_bytes(c.codec, c.head_dim);
  const uint64_t bb = arena_->block_bytes();
  const device::DeviceKvBlock d = device::arena_block_descriptor(arena_->geometry(), 0);  // offsets within a block
  // One block's new rows of every layer, stream and head, encoded as kv_write encodes them, into
  // `block` (its earlier rows, when kept, already there).
  ThreadPool pool;  // every hardware thread
  std::vector<std::vector<float>> rows(pool.num_threads(), std::vector<float>(static_cast<size_t>(c.head_dim)));
  auto make_block = [&](int64_t b, uint8_t* block, std::vector<float>& row) {
    const int64_t slot0 = std::max<int64_t>(0, num_tokens_ - b * c.block_tokens);
    const int64_t slot1 = std::min<int64_t>(c.block_tokens, end - b * c.block_tokens);
    for (int32_t l = 0; l < c.num_layers; ++l) {
      const uint64_t lo = static_cast<uint64_t>(arena_->geometry().layer_offset(l));
      for (int st = 0; st < 2; ++st) {
        for (int32_t h = 0; h < c.num_kv_heads; ++h) {
          for (int64_t s = slot0; s < slot1; ++s) {
            synthetic_kv_row(seed, l, st, h, b * c.block_tokens + s, c.head_dim, row.data());
            const int64_t r = static_cast<int64_t>(h) * c.block_tokens + s;
            uint8_t* elems = block + (st == 0 ? d.k_elems : d.v_elems) + lo + r * reb;
            uint8_t* scales = block + (st == 0 ? d.k_scales : d.v_scales) + lo + r * rsb;
            kernels::encode_kv_rows(c.codec, row.data(), 1, c.head_dim, elems, scales);
          }
        }
      }
    }
  };
  // Batches of blocks made on every core, then uploaded one by one from this thread (the backend
  // is this thread's).
  const int64_t b0 = num_tokens_ / c.block_tokens, b1 = (end + c.block_tokens - 1) / c.block_tokens;
  const int64_t batch = std::max<int64_t>(pool.num_threads(), std::min<int64_t>(256, static_cast<int64_t>((uint64_t{256} << 20) / bb)));
  std::vector<uint8_t> buf(static_cast<size_t>(std::min(batch, b1 - b0)) * bb);
  for (int64_t first = b0; first < b1; first += batch) {
    const int64_t count = std::min(batch, b1 - first);
    for (int64_t i = 0; i < count; ++i) {
      uint8_t* block = buf.data() + static_cast<uint64_t>(i) * bb;
      if (first + i == b0 && num_tokens_ % c.block_tokens != 0) {
        const uint8_t* dev = arena_->data() + static_cast<uint64_t>(block_table_[first + i].idx) * bb;
        HZ_RETURN_IF_ERROR(backend_.download(block, dev, bb));  // the block's earlier rows are kept
      } else {
        std::fill(block, block + bb, uint8_t{0});
      }
    }
    pool.parallel_for(count, [&](int64_t i, int thread_idx) {
      make_block(first + i, buf.data() + static_cast<uint64_t>(i) * bb, rows[thread_idx]);
    });
    for (int64_t i = 0; i < count; ++i) {
      uint8_t* dev = arena_->data() + static_cast<uint64_t>(block_table_[first + i].idx) * bb;
      HZ_RETURN_IF_ERROR(backend_.upload(dev, buf.data() + static_cast<uint64_t>(i) * bb, bb));
    }
    HZ_RETURN_IF_ERROR(backend_.synchronize());  // `buf` is reused
  }
  if (num_tokens_ == 0) synthetic_seed_ = seed;
  if (synthetic_seed_ && *synthetic_seed_ != seed) synthetic_seed_.reset();
  num_tokens_ = end;
  return Status();
}

Result<DeviceSequence::AttentionCheck> DeviceSequence::check_synthetic_attention(int32_t layer, uint64_t query_seed) const {
  const DeviceKvArenaConfig& c = arena_->config();
  const ModelConfig& mc = model_.config();
  if (!synthetic_seed_ || num_tokens_ == 0)
    return invalid_argument("the attention check needs a sequence filled only by fill_synthetic (from position 0)");
  if (layer < 0 || layer >= c.num_layers) return invalid_argument("attention check: layer {} of {}", layer, c.num_layers);
  const int32_t hd = c.head_dim, heads = mc.num_heads, group = mc.num_heads / mc.num_kv_heads;
  const int64_t pos = num_tokens_ - 1;
  // The query: seeded, wide enough that the softmax is far from uniform.
  std::vector<float> q(static_cast<size_t>(heads) * hd);
  for (int32_t h = 0; h < heads; ++h) synthetic_kv_row(query_seed, 0, 0, h, -1, hd, q.data() + static_cast<int64_t>(h) * hd);
  for (auto& v : q) v *= 4.0f;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  // On the device: this sequence's blocks, one query, the layer's planes.
  std::vector<std::vector<device::DeviceKvBlock>> tables(1);
  for (int32_t b = 0; b < arena_->blocks_for(num_tokens_); ++b) tables[0].push_back(arena_->descriptor(block_table_[b].idx));
  HZ_ASSIGN_OR_RETURN(const device::AttentionUpload up, device::build_attention_upload(tables, {0}, {pos}, c.block_tokens,
                                                                                         mc.sliding_window, 1));
  const int64_t partials = cuda::attention_partial_floats(1, heads, up.max_segments, hd);
  HZ_ASSIGN_OR_RETURN(cuda::DeviceMemory dup, backend_.allocate(up.bytes.size(), "attention check tables"));
  HZ_ASSIGN_OR_RETURN(cuda::DeviceMemory dq, backend_.allocate(4 * q.size(), "attention check query"));
  HZ_ASSIGN_OR_RETURN(cuda::DeviceMemory dout, backend_.allocate(4 * q.size(), "attention check output"));
  HZ_ASSIGN_OR_RETURN(cuda::DeviceMemory dpart, backend_.allocate(4 * static_cast<uint64_t>(partials), "attention check partials"));
  HZ_RETURN_IF_ERROR(backend_.upload(dup.data(), up.bytes.data(), up.bytes.size()));
  HZ_RETURN_IF_ERROR(backend_.upload(dq.data(), q.data(), 4 * q.size()));
  cuda::PagedAttnArgs pa;
  device::bind_attention_upload(up, dup.as<uint8_t>(), &pa);
  pa.arena = arena_->data();
  pa.layer_offset = static_cast<uint64_t>(arena_->geometry().layer_offset(layer));
  pa.qblock_size = 1;
  pa.num_heads = heads;
  pa.num_kv_heads = c.num_kv_heads;
  pa.head_dim = hd;
  pa.block_tokens = c.block_tokens;
  pa.window = mc.sliding_window;
  pa.scale = scale;
  pa.q = dq.as<float>();
  pa.partials = dpart.as<float>();
  pa.out = dout.as<float>();
  HZ_RETURN_IF_ERROR(backend_.paged_attention(pa));
  std::vector<float> got(q.size());
  HZ_RETURN_IF_ERROR(backend_.download(got.data(), dout.data(), 4 * got.size()));

  // On the host: every key's row made again, encoded and decoded by the scalar codec, in double.
  const int64_t first = attn_first_key(pos, mc.sliding_window);
  const int64_t reb = kernels::kv_row_elem_bytes(c.codec, hd), rsb = device::arena_row_scale_bytes(c.codec, hd);
  std::vector<double> want(q.size(), 0.0);
  auto kv_head = [&](int32_t g) {
    std::vector<float> row(static_cast<size_t>(hd)), dec(static_cast<size_t>(hd));
    std::vector<uint8_t> elems(static_cast<size_t>(reb)), scales(static_cast<size_t>(std::max<int64_t>(rsb, 4)));
    auto decoded = [&](int32_t st, int64_t p) {
      synthetic_kv_row(*synthetic_seed_, layer, st, g, p, hd, row.data());
      kernels::ref::encode_kv_rows(c.codec, row.data(), 1, hd, elems.data(), scales.data());
      kernels::ref::decode_kv_rows(c.codec, elems.data(), scales.data(), 1, hd, dec.data());
    };
    std::vector<std::vector<double>> scores(group, std::vector<double>(static_cast<size_t>(pos - first + 1)));
    for (int64_t p = first; p <= pos; ++p) {
      decoded(0, p);
      for (int32_t j = 0; j < group; ++j) {
        const float* qh = q.data() + static_cast<int64_t>(g * group + j) * hd;
        double s = 0;
        for (int32_t i = 0; i < hd; ++i) s += static_cast<double>(qh[i] * scale) * dec[i];
        scores[j][p - first] = s;
      }
    }
    for (auto& sc : scores) {
      const double m = *std::max_element(sc.begin(), sc.end());
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - m));
      for (double& x : sc) x /= sum;
    }
    for (int64_t p = first; p <= pos; ++p) {
      decoded(1, p);
      for (int32_t j = 0; j < group; ++j) {
        double* o = want.data() + static_cast<int64_t>(g * group + j) * hd;
        for (int32_t i = 0; i < hd; ++i) o[i] += scores[j][p - first] * dec[i];
      }
    }
  };
  ThreadPool pool(std::min<int>(c.num_kv_heads, static_cast<int>(std::thread::hardware_concurrency())));
  pool.parallel_for(c.num_kv_heads, [&](int64_t g, int) { kv_head(static_cast<int32_t>(g)); });
  AttentionCheck r;
  r.layer = layer;
  r.depth = num_tokens_;
  for (size_t i = 0; i < got.size(); ++i) {
    r.max_abs_diff = std::max(r.max_abs_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    r.max_abs_ref = std::max(r.max_abs_ref, std::fabs(want[i]));
  }
  if (!std::isfinite(r.max_abs_diff)) r.max_abs_diff = std::numeric_limits<double>::infinity();
  return r;
}

}  // namespace hz
