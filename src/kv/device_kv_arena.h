// DeviceKvArena: the paged KV cache's blocks in a backend's memory (GPU memory, or host memory under
// the host emulation), as KvStorage for the KV manager. The block pool, block tables and prefix
// cache stay on the host; device attention reads blocks through descriptors (device/kv_block_desc.h)
// in the layout of kv/kv_layout.h: block b holds every layer's K then V plane. Rows are written in
// the arena type at once (f32, f16, bf16, fp8, int8, int4: each row on its own, int8/int4 with
// their group scales, fp8 with one f32 scale per row where the CPU has one per block and head), so
// a full block is final and no staging is needed. (The CPU cache keeps the block a query is in
// exact and encodes it when complete; the device quantizes every row as it is written.)
// Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "base/status.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/kv_block_table.h"
#include "kv/block_pool.h"
#include "kv/kv_layout.h"
#include "kv/kv_storage.h"

namespace hz {

struct DeviceKvArenaConfig {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 16;
  int32_t num_blocks = 0;
  kernels::KvCodec codec = kernels::KvCodec::kF16;  // f32, f16, bf16, fp8, int8 or int4
  // K / V rows stored rotated by the KV rotation (kv/kv_rotation.h), as a rotated CPU cache stores them.
  bool rotated_k = false;
  bool rotated_v = false;
};

class DeviceKvArena : public KvStorage {
 public:
  // Allocates num_blocks blocks on `backend` (not owned; must outlive the arena). Errors name the
  // field at fault, a codec the device cannot write, or the allocation that failed.
  static Result<std::unique_ptr<DeviceKvArena>> create(const DeviceKvArenaConfig& cfg, cuda::Backend& backend);
  DeviceKvArena(const DeviceKvArena&) = delete;
  DeviceKvArena& operator=(const DeviceKvArena&) = delete;

  // cfg's codec and rotation for KV precision `p`. Errors name the flag the device cache lacks: a
  // hot window, separate key and value types, a type it does not write.
  static Status apply_precision(const KvPrecision& p, DeviceKvArenaConfig* cfg);
  // Bytes of one block (every layer's K and V planes) for `cfg`, as the planner counts them
  // (kv/kv_layout.h with KvGeometry::fp8_row_scales).
  static uint64_t block_bytes_for(const DeviceKvArenaConfig& cfg);

  const DeviceKvArenaConfig& config() const { return cfg_; }
  const device::ArenaGeometry& geometry() const { return geo_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  uint8_t* data() const { return mem_.as<uint8_t>(); }
  // Unique per arena in the process: a new arena at a freed one's address is still another
  // (captured graphs hold its geometry, codec and pointers).
  uint64_t id() const { return id_; }
  uint64_t block_bytes() const { return static_cast<uint64_t>(geo_.block_bytes()); }
  uint64_t total_bytes() const { return block_bytes() * static_cast<uint64_t>(cfg_.num_blocks); }
  // One block past the pool's, owned by no sequence: the padding rows of a decode step padded to
  // its graph's batch size write and read there (model/device_model.h).
  int32_t pad_block() const { return cfg_.num_blocks; }
  device::DeviceKvBlock descriptor(int32_t block) const { return device::arena_block_descriptor(geo_, block); }
  int32_t blocks_for(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + cfg_.block_tokens - 1) / cfg_.block_tokens);
  }
  // The first failed device operation of a KvStorage call (they return nothing); ok when none.
  const Status& error() const { return error_; }

  // KvStorage: every full block is final; the device has no far tier and no staged forms.
  int64_t finalized_blocks(int64_t num_positions) const override { return num_positions / cfg_.block_tokens; }
  void copy_block(int32_t src, int32_t dst) override;
  bool hot_form_available(int32_t) const override { return true; }
  std::optional<int32_t> spill(int32_t) override { return std::nullopt; }
  void release_far_slot(int32_t) override {}
  bool reopen_block(int32_t) override { return true; }

 private:
  DeviceKvArena(const DeviceKvArenaConfig& cfg, cuda::Backend& backend);

  DeviceKvArenaConfig cfg_;
  device::ArenaGeometry geo_;
  cuda::Backend& backend_;
  BlockPool pool_;
  cuda::DeviceMemory mem_;
  Status error_;
  uint64_t id_;
};

}  // namespace hz
