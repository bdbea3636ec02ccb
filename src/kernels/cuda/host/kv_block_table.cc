#include "kernels/cuda/kv_block_table.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/launch.h"

namespace hz::device {
namespace {

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

template <typename T>
void put(std::vector<uint8_t>& buf, int64_t offset, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(buf.data() + offset, v.data(), v.size() * sizeof(T));
}

}  // namespace

int64_t ArenaGeometry::plane_elem_bytes() const {
  return num_kv_heads * block_tokens * kernels::kv_row_elem_bytes(codec, head_dim);
}

int64_t arena_row_scale_bytes(kernels::KvCodec c, int64_t head_dim) {
  return c == kernels::KvCodec::kFp8 ? 4 : kernels::kv_row_scale_bytes(c, head_dim);
}

int64_t ArenaGeometry::plane_bytes() const {
  return plane_elem_bytes() + num_kv_heads * block_tokens * arena_row_scale_bytes(codec, head_dim);
}

Status ArenaGeometry::validate() const {
  if (num_layers <= 0) return invalid_argument("KV arena: num_layers must be > 0, got {}", num_layers);
  if (num_kv_heads <= 0) return invalid_argument("KV arena: num_kv_heads must be > 0, got {}", num_kv_heads);
  if (head_dim < 8 || head_dim > 256 || head_dim % 2 != 0)
    return invalid_argument("KV arena: head_dim must be even and within 8..256, got {}", head_dim);
  if (block_tokens <= 0 || block_tokens > 4096) return invalid_argument("KV arena: block_tokens must be within 1..4096, got {}", block_tokens);
  return Status();
}

DeviceKvBlock arena_block_descriptor(const ArenaGeometry& g, int64_t block_id) {
  const uint64_t base = static_cast<uint64_t>(block_id) * static_cast<uint64_t>(g.block_bytes());
  const uint64_t plane = static_cast<uint64_t>(g.plane_bytes());
  const uint64_t elems = static_cast<uint64_t>(g.plane_elem_bytes());
  DeviceKvBlock d;
  d.k_elems = base;
  d.v_elems = base + plane;
  d.k_scales = base + elems;
  d.v_scales = base + plane + elems;
  d.codec = static_cast<uint32_t>(g.codec);
  return d;
}

Result<AttentionUpload> build_attention_upload(const std::vector<std::vector<DeviceKvBlock>>& tables,
                                               const std::vector<int32_t>& query_seq, const std::vector<int64_t>& query_pos,
                                               int64_t block_tokens, int64_t window, int32_t qblock_size) {
  if (query_seq.size() != query_pos.size())
    return invalid_argument("attention upload: {} query sequences but {} query positions", query_seq.size(), query_pos.size());
  if (block_tokens <= 0) return invalid_argument("attention upload: block_tokens must be > 0, got {}", block_tokens);
  if (qblock_size <= 0) return invalid_argument("attention upload: query block size must be > 0, got {}", qblock_size);
  AttentionUpload u;
  u.num_seqs = static_cast<int64_t>(tables.size());
  u.num_queries = static_cast<int64_t>(query_seq.size());
  std::vector<int64_t> begin(tables.size() + 1, 0);
  std::vector<DeviceKvBlock> blocks;
  for (size_t s = 0; s < tables.size(); ++s) {
    begin[s + 1] = begin[s] + static_cast<int64_t>(tables[s].size());
    blocks.insert(blocks.end(), tables[s].begin(), tables[s].end());
  }
  std::vector<int32_t> qfirst;
  std::vector<bool> seen(tables.size(), false);
  int64_t max_segments = 0;
  for (int64_t i = 0; i < u.num_queries;) {
    const int32_t s = query_seq[i];
    if (s < 0 || s >= static_cast<int32_t>(tables.size()))
      return invalid_argument("attention upload: query {} names sequence {} of {}", i, s, tables.size());
    if (seen[s]) return invalid_argument("attention upload: the queries of sequence {} are not consecutive (query {})", s, i);
    seen[s] = true;
    int64_t j = i;
    while (j < u.num_queries && query_seq[j] == s) {
      const int64_t pos = query_pos[j];
      const int64_t capacity = static_cast<int64_t>(tables[s].size()) * block_tokens;
      if (pos < 0 || pos >= capacity)
        return invalid_argument("attention upload: query {} at position {} is beyond sequence {}'s {} blocks", j, pos, s,
                                tables[s].size());
      ++j;
    }
    // Query blocks of consecutive queries of sequence s.
    for (int64_t b = i; b < j; b += qblock_size) {
      const int64_t e = std::min<int64_t>(j, b + qblock_size);
      int64_t lo = INT64_MAX, hi = 0;
      for (int64_t k = b; k < e; ++k) {
        lo = std::min(lo, cuda::attention_first_segment(query_pos[k], window));
        hi = std::max(hi, cuda::attention_last_segment(query_pos[k]));
      }
      max_segments = std::max(max_segments, hi - lo + 1);
      qfirst.push_back(static_cast<int32_t>(b));
    }
    i = j;
  }
  qfirst.push_back(static_cast<int32_t>(u.num_queries));
  u.num_qblocks = static_cast<int32_t>(qfirst.size()) - 1;
  u.max_segments = static_cast<int32_t>(max_segments);

  const int64_t a = AttentionUpload::kUploadAlign;
  u.blocks_offset = 0;
  u.seq_block_begin_offset = align_up(u.blocks_offset + static_cast<int64_t>(blocks.size() * sizeof(DeviceKvBlock)), a);
  u.query_seq_offset = align_up(u.seq_block_begin_offset + static_cast<int64_t>(begin.size() * sizeof(int64_t)), a);
  u.query_pos_offset = align_up(u.query_seq_offset + static_cast<int64_t>(query_seq.size() * sizeof(int32_t)), a);
  u.qblock_first_offset = align_up(u.query_pos_offset + static_cast<int64_t>(query_pos.size() * sizeof(int64_t)), a);
  u.bytes.assign(static_cast<size_t>(align_up(u.qblock_first_offset + static_cast<int64_t>(qfirst.size() * sizeof(int32_t)), a)), 0);
  put(u.bytes, u.blocks_offset, blocks);
  put(u.bytes, u.seq_block_begin_offset, begin);
  put(u.bytes, u.query_seq_offset, query_seq);
  put(u.bytes, u.query_pos_offset, query_pos);
  put(u.bytes, u.qblock_first_offset, qfirst);
  return u;
}

void bind_attention_upload(const AttentionUpload& u, const uint8_t* device_bytes, cuda::PagedAttnArgs* a) {
  a->blocks = reinterpret_cast<const DeviceKvBlock*>(device_bytes + u.blocks_offset);
  a->seq_block_begin = reinterpret_cast<const int64_t*>(device_bytes + u.seq_block_begin_offset);
  a->query_seq = reinterpret_cast<const int32_t*>(device_bytes + u.query_seq_offset);
  a->query_pos = reinterpret_cast<const int64_t*>(device_bytes + u.query_pos_offset);
  a->qblock_first = reinterpret_cast<const int32_t*>(device_bytes + u.qblock_first_offset);
  a->num_qblocks = u.num_qblocks;
  a->max_segments = u.max_segments;
  a->num_queries = u.num_queries;
}

}  // namespace hz::device
