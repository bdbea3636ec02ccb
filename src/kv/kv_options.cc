#include "kv/kv_options.h"

#include <algorithm>

namespace hz {

namespace {

Status check_fields(const KvOptions& o, const KvDemand& d) {
  if (o.block_tokens < 16 || o.block_tokens > 256 || o.block_tokens % 16 != 0)
    return invalid_argument("--block-size {} must be a multiple of 16 between 16 and 256", o.block_tokens);
  if (o.hot_window < 0) return invalid_argument("--kv-hot-window must be 0 or more");
  if (d.max_num_seqs < 1) return invalid_argument("--max-num-seqs must be at least 1");
  if (d.prefill_chunk < 1) return invalid_argument("--prefill-chunk must be at least 1");
  if (d.max_model_len < 1) return invalid_argument("--max-model-len must be positive");
  if (d.geometry.num_layers == 0 || d.geometry.num_heads == 0 || d.geometry.head_dim == 0)
    return invalid_argument("the model's KV shape is empty (layers {}, KV heads {}, head dim {})", d.geometry.num_layers,
                            d.geometry.num_heads, d.geometry.head_dim);
  return Status();
}

Status check_remote(const KvOptions& o) {
  if (o.remote_url.empty()) return Status();
  if (o.remote_secret.empty())
    return invalid_argument("--kv-remote needs a secret shared by the replicas (--kv-remote-secret or the "
                            "HORIZON_KV_REMOTE_SECRET environment variable): it keys block names and record MACs");
  if (o.remote_secret.size() < 16)
    return invalid_argument("--kv-remote-secret has {} characters; use at least 16 (e.g. openssl rand -hex 32)",
                            o.remote_secret.size());
  if (o.remote_timeout_ms < 1) return invalid_argument("--kv-remote-timeout must be at least 1 ms");
  if (o.remote_deadline_ms < 1) return invalid_argument("--kv-remote-deadline must be at least 1 ms");
  if (o.remote_ttl_s < 0) return invalid_argument("--kv-remote-ttl must be 0 (none) or more seconds");
  if (o.remote_codec != "none" && o.remote_codec != "zstd" && o.remote_codec != "lz4")
    return invalid_argument("--kv-remote-codec '{}' is not one of none, zstd, lz4", o.remote_codec);
  return Status();
}

KvPrecision resolve_precision(const KvOptions& o) {
  KvPrecision p;
  p.hot = o.hot_type;
  p.hot_v = o.hot_type_v;
  p.hot_window = static_cast<uint64_t>(o.hot_window);
  p.cold = o.cold_type;
  p.cold_v = o.cold_type_v;
  p.sink_tokens = static_cast<uint64_t>(std::max(o.sink_tokens, 0));
  p = kv_canonical(p);
  apply_kv_rotation(o.rotation, p);
  return kv_canonical(p);
}

// The default budget: room for max_num_seqs full-length sequences, capped at a quarter of RAM.
uint64_t default_budget(const KvPlan& p, const KvDemand& d) {
  const uint64_t blocks_per_seq = (static_cast<uint64_t>(d.max_model_len) + p.block_tokens - 1) / p.block_tokens;
  const uint64_t ram = d.total_ram_bytes > 0 ? d.total_ram_bytes : (uint64_t{8} << 30);
  return std::min<uint64_t>(blocks_per_seq * static_cast<uint64_t>(d.max_num_seqs) * p.block_bytes, ram / 4);
}

// Prefix caching with a hot window keeps the hot (staging) form of recently cached blocks so that a
// later sequence can attach them (KvCache::set_hot_retention); that memory comes out of the budget:
// enough for every sequence slot's attach point (hot blocks + 1) four times over, at most a quarter.
int32_t retained_blocks(const KvPlan& p, const KvDemand& d) {
  if (!p.prefix_caching || p.precision.hot_window == 0) return 0;
  const KvType staging = kv_staging_type(p.precision);
  const uint64_t staging_bytes = kv_block_bytes(d.geometry, staging, p.block_tokens);
  return static_cast<int32_t>(
      std::min<uint64_t>(4 * static_cast<uint64_t>(p.hot_blocks + 1) * static_cast<uint64_t>(d.max_num_seqs),
                         p.budget_bytes / 4 / staging_bytes));
}

}  // namespace

Result<KvRotationMode> parse_kv_rotation(const std::string& name, const char* flag) {
  if (name == "auto") return KvRotationMode::kAuto;
  if (name == "on") return KvRotationMode::kOn;
  if (name == "off") return KvRotationMode::kOff;
  return invalid_argument("{} '{}' is not one of auto, on, off", flag, name);
}

bool kv_rotation_on(KvRotationMode mode, const KvPrecision& p, int32_t stream) {
  if (mode != KvRotationMode::kAuto) return mode == KvRotationMode::kOn;
  // Measured on stories260K (ctx 256, mean KLD vs f32 KV): int8 3.2e-4 -> 1.6e-4, int4 0.14 ->
  // 0.061, int4 under a 32-token f16 window 1.2e-2 -> 3.8e-3; fp8 4.2e-3 -> 7.4e-3 (worse: its one
  // scale per head and block gains nothing from flatter rows, and rounding spreads over them).
  // int8c / int4c / int3 / int2 (asymmetric per channel) measured worse rotated (int4c 3.56e-3 -> 5.39e-3;
  // f16 hot 32: int2 1.57e-2 -> 2.70e-2, int3 2.78e-3 -> 3.01e-3): rotation spreads an outlier
  // channel, which a channel scale isolates.
  auto grouped = [](KvType t) { return t == KvType::kInt8 || t == KvType::kInt4; };
  return grouped(p.hot_types()[stream]) || (p.mixed() && grouped(p.cold_types()[stream]));
}

void apply_kv_rotation(KvRotationMode mode, KvPrecision& p) {
  p.rotated = kv_rotation_on(mode, p, 0);
  p.rotated_v = kv_rotation_on(mode, p, 1);
  if (p.rotated_v == p.rotated) p.rotated_v.reset();
}

Status KvOptions::check_types() const {
  for (int32_t st = 0; st < 2; ++st) {
    const KvType t = st == 0 ? hot_type : hot_type_v.value_or(hot_type);
    if (!kv_type_cold_only(t)) continue;
    const char* flag = st == 0 ? (hot_type_v ? "--kv-cache-dtype-k" : "--kv-cache-dtype") : "--kv-cache-dtype-v";
    return invalid_argument("{1} {0} is too lossy for every position: use it as --kv-cold-dtype{2} {0} "
                            "under a --kv-hot-window of a wider {1} (e.g. --kv-hot-window 32 "
                            "--kv-cold-dtype{2} {0})",
                            kv_type_name(t), flag, st == 0 ? (hot_type_v ? "-k" : "") : "-v");
  }
  if (disk_type && kv_type_cold_only(*disk_type))
    return invalid_argument("--kv-disk-dtype {}: int3 and int2 are only usable as --kv-cold-dtype under a hot window",
                            kv_type_name(*disk_type));
  if (sink_tokens < 0) return invalid_argument("--kv-sink-tokens must be 0 or more, got {}", sink_tokens);
  const KvTypePair hot{hot_type, hot_type_v.value_or(hot_type)}, cold{cold_type, cold_type_v.value_or(cold_type)};
  if (sink_tokens > 0 && (hot_window == 0 || hot == cold))
    return invalid_argument("--kv-sink-tokens {} needs --kv-hot-window N and a --kv-cold-dtype other than "
                            "--kv-cache-dtype: sink tokens stay in the hot type while older tokens take the cold "
                            "type, and without a cold type every position is stored alike",
                            sink_tokens);
  return Status();
}

Result<KvPlan> KvOptions::validate(const KvDemand& d) const {
  HZ_RETURN_IF_ERROR(check_fields(*this, d));
  HZ_RETURN_IF_ERROR(check_types());
  KvPlan p;
  p.block_tokens = block_tokens;
  p.precision = resolve_precision(*this);
  if (d.geometry.num_streams < 2 && (!p.precision.hot_types().same() || !p.precision.cold_types().same()))
    return invalid_argument("--kv-cache-dtype-v / --kv-cold-dtype-v: this model stores one latent stream per position "
                            "(MLA), not separate keys and values; give one type (--kv-cache-dtype)");
  const bool hot_window = p.precision.hot_window > 0;
  p.hot_blocks = hot_window ? static_cast<int32_t>((p.precision.hot_window - 1 + block_tokens - 1) / block_tokens) : 0;
  // The disk's prefix store is a tier of the prefix cache: it implies it, but not with a hot window.
  p.prefix_store = !disk_dir.empty() && !hot_window;
  HZ_RETURN_IF_ERROR(check_remote(*this));
  p.remote_tier = !remote_url.empty() && !hot_window;
  p.prefix_caching = prefix_caching || p.prefix_store || p.remote_tier;
  if (!remote_url.empty() && hot_window)
    p.warnings.push_back("--kv-remote with --kv-hot-window: the remote tier is off (blocks would come back from Redis in "
                         "their cold form only, and a new sequence reads its prefix's newest blocks hot)");
  if (!disk_dir.empty() && hot_window)
    p.warnings.push_back("--kv-disk-dir with --kv-hot-window: the prefix store is off (blocks would come back from disk "
                         "in their cold form only); long contexts still keep their far blocks on disk");
  p.block_bytes = kv_block_bytes(d.geometry, p.precision.arena_types(), block_tokens);
  p.budget_bytes = budget_bytes > 0 ? budget_bytes : default_budget(p, d);
  p.retained_blocks = retained_blocks(p, d);
  const KvType staging = kv_staging_type(p.precision);
  // Every sequence holds the staging copies of its sink blocks for its whole life.
  p.sink_blocks = static_cast<int32_t>(kv_sink_blocks(p.precision, static_cast<uint64_t>(block_tokens)));
  const uint64_t staged_blocks =
      static_cast<uint64_t>(p.retained_blocks) + static_cast<uint64_t>(p.sink_blocks) * static_cast<uint64_t>(d.max_num_seqs);
  const uint64_t staged_bytes = staged_blocks * kv_block_bytes(d.geometry, staging, block_tokens);
  if (staged_bytes >= p.budget_bytes)
    return out_of_range("--kv-budget {} bytes holds no KV block besides {} staging copies (hot copies of sink blocks "
                        "and for prefix reuse)",
                        p.budget_bytes, staged_blocks);
  const uint64_t pool_bytes = p.budget_bytes - staged_bytes;
  const uint64_t num_blocks = pool_bytes / p.block_bytes;
  if (num_blocks == 0)
    return out_of_range("--kv-budget {} bytes holds no KV block (one block of {} tokens takes {} bytes)", pool_bytes,
                        block_tokens, p.block_bytes);
  p.num_blocks = static_cast<int32_t>(std::min<uint64_t>(num_blocks, INT32_MAX));
  if (disk_dir.empty() && budget_bytes > 0 && d.max_model_len > 0 &&
      static_cast<uint64_t>(p.num_blocks) * static_cast<uint64_t>(block_tokens) < static_cast<uint64_t>(d.max_model_len))
    p.warnings.push_back(fmt::format(
        "--kv-budget holds {} tokens, less than one sequence of --max-model-len {}: longer requests are refused (raise "
        "--kv-budget, lower --max-model-len or add a disk tier, --kv-disk-dir)",
        static_cast<uint64_t>(p.num_blocks) * static_cast<uint64_t>(block_tokens), d.max_model_len));
  if (!disk_dir.empty()) {
    // What one running sequence must keep in RAM: the blocks a prefill chunk writes, those its
    // queries read hot or exactly, and one partly written block. A smaller pool gains nothing from
    // the far tier (prompts must fit in it anyway).
    const int64_t min_blocks = (d.prefill_chunk + block_tokens - 1) / block_tokens + p.hot_blocks + 2;
    p.far_tier = p.num_blocks >= min_blocks;
    // Said only where it limits something: a pool that holds every sequence's whole context
    // (--max-num-seqs at --max-model-len) needs no far tier.
    const int64_t context_blocks = (static_cast<int64_t>(d.max_model_len) + block_tokens - 1) / block_tokens *
                                   std::max<int64_t>(1, d.max_num_seqs);
    if (!p.far_tier && (d.max_model_len <= 0 || p.num_blocks < context_blocks))
      p.warnings.push_back(fmt::format(
          "KV far tier off: --kv-budget holds {} KV blocks, and a running sequence with its far blocks on disk needs {} "
          "in RAM (a --prefill-chunk of {} tokens plus the hot window); contexts are limited to the RAM pool",
          p.num_blocks, min_blocks, d.prefill_chunk));
  }
  return p;
}

}  // namespace hz
