#include "kv/device_kv_arena.h"

#include <atomic>

#include "kernels/cuda/launch_checks.h"

namespace hz {
namespace {

uint64_t next_arena_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

device::ArenaGeometry geometry_of(const DeviceKvArenaConfig& cfg) {
  device::ArenaGeometry g;
  g.num_layers = cfg.num_layers;
  g.num_kv_heads = cfg.num_kv_heads;
  g.head_dim = cfg.head_dim;
  g.block_tokens = cfg.block_tokens;
  g.codec = cfg.codec;
  return g;
}

}  // namespace

Status DeviceKvArena::apply_precision(const KvPrecision& p, DeviceKvArenaConfig* cfg) {
  if (p.hot_window > 0)
    return unimplemented("--kv-hot-window: the GPU KV cache keeps one type for every position (run on the CPU for a hot window)");
  const KvTypePair t = p.hot_types();
  if (!t.same()) return unimplemented("--kv-cache-dtype-k / -v: the GPU KV cache keeps keys and values in one type");
  if (!cuda::kv_codec_supported(t.k))
    return unimplemented("--kv-cache-dtype {}: the GPU KV cache holds f16, bf16, f32, fp8, int8 or int4 (the per-channel "
                         "types run on the CPU)",
                         kv_type_name(t.k));
  cfg->codec = t.k;
  cfg->rotated_k = p.rotated_stream(0);
  cfg->rotated_v = p.rotated_stream(1);
  return Status();
}

uint64_t DeviceKvArena::block_bytes_for(const DeviceKvArenaConfig& cfg) {
  return static_cast<uint64_t>(geometry_of(cfg).block_bytes());
}

DeviceKvArena::DeviceKvArena(const DeviceKvArenaConfig& cfg, cuda::Backend& backend)
    : cfg_(cfg), geo_(geometry_of(cfg)), backend_(backend), pool_(cfg.num_blocks), id_(next_arena_id()) {}

Result<std::unique_ptr<DeviceKvArena>> DeviceKvArena::create(const DeviceKvArenaConfig& cfg, cuda::Backend& backend) {
  using kernels::KvCodec;
  if (!cuda::kv_codec_supported(cfg.codec))
    return unimplemented("--kv-cache-dtype: the GPU KV cache holds f16, bf16, f32, fp8, int8 or int4 (the per-channel types "
                         "int8c, int4c, int3 and int2 run on the CPU)");
  if (cfg.num_blocks <= 0) return invalid_argument("device KV arena: num_blocks must be > 0, got {}", cfg.num_blocks);
  const device::ArenaGeometry g = geometry_of(cfg);
  HZ_RETURN_IF_ERROR(g.validate());
  std::unique_ptr<DeviceKvArena> a(new DeviceKvArena(cfg, backend));
  const uint64_t bytes = a->total_bytes() + a->block_bytes();  // and the pad block
  HZ_ASSIGN_OR_RETURN(a->mem_, backend.allocate(bytes, "the KV cache"));
  // Zeroed once: a block's unwritten rows (past a sequence's end) are never read, but a zero arena
  // keeps a stray read finite.
  HZ_RETURN_IF_ERROR(backend.fill_zero(a->mem_.data(), bytes));
  return a;
}

void DeviceKvArena::copy_block(int32_t src, int32_t dst) {
  const uint64_t bb = block_bytes();
  Status s = backend_.copy(data() + static_cast<uint64_t>(dst) * bb, data() + static_cast<uint64_t>(src) * bb, bb);
  if (!s.ok() && error_.ok()) error_ = s;
}

}  // namespace hz
