#include "runtime/engine_options.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/cuda/backend.h"

namespace hz {

KvOptions kv_options(const EngineOptions& o) {
  KvOptions k;
  k.block_tokens = o.block_size;
  k.hot_type = o.kv_dtype;
  k.hot_window = o.kv_hot_window;
  k.cold_type = o.kv_cold_dtype;
  k.hot_type_v = o.kv_dtype_v;
  k.cold_type_v = o.kv_cold_dtype_v;
  k.rotation = o.kv_rotation;
  k.sink_tokens = o.kv_sink_tokens;
  k.budget_bytes = o.kv_budget_bytes;
  k.prefix_caching = o.enable_prefix_caching;
  k.disk_dir = o.kv_disk_dir;
  k.disk_budget_bytes = o.kv_disk_budget_bytes;
  k.disk_codec = o.kv_disk_codec;
  k.disk_level = o.kv_disk_level;
  k.disk_policy = o.kv_disk_policy;
  k.disk_type = o.kv_disk_dtype;
  k.remote_url = o.kv_remote;
  k.remote_secret = o.kv_remote_secret;
  k.remote_timeout_ms = o.kv_remote_timeout_ms;
  k.remote_deadline_ms = o.kv_remote_deadline_ms;
  k.remote_ttl_s = o.kv_remote_ttl_s;
  k.remote_codec = o.kv_remote_codec;
  return k;
}

KvPrecision kv_precision(const EngineOptions& o) {
  KvPrecision p;
  p.hot = o.kv_dtype;
  p.hot_v = o.kv_dtype_v;
  p.hot_window = static_cast<uint64_t>(std::max(o.kv_hot_window, 0));
  p.cold = o.kv_cold_dtype;
  p.cold_v = o.kv_cold_dtype_v;
  p.sink_tokens = static_cast<uint64_t>(std::max(o.kv_sink_tokens, 0));
  p = kv_canonical(p);
  apply_kv_rotation(o.kv_rotation, p);
  return kv_canonical(p);
}

Result<std::unique_ptr<cuda::Backend>> make_device_backend(EngineDevice device) {
  HZ_CHECK(device != EngineDevice::kCpu);
  if (device == EngineDevice::kCuda) return cuda::make_cuda_backend("--device cuda");
  return cuda::make_host_backend();
}

}  // namespace hz
