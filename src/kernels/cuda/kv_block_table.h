// The block-descriptor table device attention reads, and the one-copy upload of a step's tables.
// Provisional: the KV manager will build descriptors over its own device arena; until then
// `arena_block_descriptor` places blocks as kv/kv_layout.h describes (one block = every layer's
// K and V planes, elements then scales). Plain structs shared by host code and the CUDA kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "device/kv_block_desc.h"
#include "kernels/cuda/launch.h"
#include "kernels/kv_codec.h"

namespace hz::device {

// Shape of the provisional arena: [num_blocks][num_layers][K, V] planes of kv_layout.h.
struct ArenaGeometry {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_tokens = 0;
  kernels::KvCodec codec = kernels::KvCodec::kF16;

  int64_t plane_elem_bytes() const;   // elements of one plane
  int64_t plane_bytes() const;        // elements + scales (equals planner kv_plane_bytes)
  int64_t block_bytes() const { return num_layers * 2 * plane_bytes(); }
  int64_t layer_offset(int64_t layer) const { return layer * 2 * plane_bytes(); }
  Status validate() const;            // errors name the field
};
DeviceKvBlock arena_block_descriptor(const ArenaGeometry& g, int64_t block_id);
// Bytes of one head row's scales in the arena: int8/int4 their f16 group scales (as on the CPU),
// fp8 one f32 (the device encodes each row on its own as it is written: kernels::ref::encode_kv_rows
// of one row), the float types none. Row r = head * block_tokens + slot of a plane has its scales at
// r * arena_row_scale_bytes past the plane's elements.
int64_t arena_row_scale_bytes(kernels::KvCodec c, int64_t head_dim);

// One engine step's attention tables, laid out for a single host-to-device copy. Arrays are
// aligned to kUploadAlign bytes inside the buffer; `*_offset` are byte offsets into it.
struct AttentionUpload {
  static constexpr int64_t kUploadAlign = 256;
  std::vector<uint8_t> bytes;
  int64_t blocks_offset = 0;          // DeviceKvBlock [total blocks], the sequences' tables in order
  int64_t seq_block_begin_offset = 0; // int64 [num_seqs + 1]
  int64_t query_seq_offset = 0;       // int32 [num_queries]
  int64_t query_pos_offset = 0;       // int64 [num_queries]
  int64_t qblock_first_offset = 0;    // int32 [num_qblocks + 1]
  int64_t num_seqs = 0;
  int64_t num_queries = 0;
  int32_t num_qblocks = 0;
  int32_t max_segments = 0;           // grid depth: the most 512-position segments of any query block
};

// Builds the upload: `tables[s]` is sequence s's blocks in position order; query i belongs to
// sequence `query_seq[i]` at position `query_pos[i]` (its keys are [first, pos] of that sequence).
// Queries of one sequence must be consecutive. Query blocks group up to `qblock_size` consecutive
// queries of one sequence (1 for decode). Errors name the offending query or sequence: a position
// beyond the sequence's blocks, a sequence index out of range, a sequence's queries not together.
Result<AttentionUpload> build_attention_upload(const std::vector<std::vector<DeviceKvBlock>>& tables,
                                               const std::vector<int32_t>& query_seq, const std::vector<int64_t>& query_pos,
                                               int64_t block_tokens, int64_t window, int32_t qblock_size);

// Points a's table fields (blocks, seq_block_begin, query_seq, query_pos, qblock_first) into the
// upload's bytes copied to `device_bytes`, and takes its counts (num_qblocks, max_segments,
// num_queries). The shape, q, scratch and output fields stay the caller's.
void bind_attention_upload(const AttentionUpload& u, const uint8_t* device_bytes, cuda::PagedAttnArgs* a);

}  // namespace hz::device
