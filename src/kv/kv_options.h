// KvOptions: every setting of the KV cache (types, hot window, block size, budget, prefix caching,
// disk store, far tier, policies), and validate(), the one place that knows how these features
// compose. The engine maps its flags onto KvOptions and builds a KvManager from the result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kv/kv_layout.h"

namespace hz {

struct KvDemand;
struct KvPlan;

// --kv-rotation: whether K/V rows are stored Hadamard-rotated (KvPrecision::rotated). kAuto turns
// it on where it was measured to lower the KL divergence (kv_rotation_on).
enum class KvRotationMode { kAuto, kOn, kOff };
Result<KvRotationMode> parse_kv_rotation(const std::string& name, const char* flag);
// Whether `mode` rotates stream `stream` (0 = K, 1 = V) of a cache of precision `p`. kAuto: on when
// that stream stores an integer type scaled per row group (int8, int4), where it was measured to
// help; off for exact types (f32, f16, bf16), fp8 and the per-channel types (int8c, int4c, int3,
// int2). So with keys in int4c and values in int4, auto rotates the values only.
bool kv_rotation_on(KvRotationMode mode, const KvPrecision& p, int32_t stream);
// Sets p.rotated / p.rotated_v from `mode`.
void apply_kv_rotation(KvRotationMode mode, KvPrecision& p);

struct KvOptions {
  int32_t block_tokens = 16;               // positions per block (16..256, a multiple of 16)
  KvType hot_type = KvType::kF16;          // the newest hot_window tokens, or every token
  int32_t hot_window = 0;                  // 0: one type for every position
  KvType cold_type = KvType::kInt8;        // blocks older than the hot window
  // Values' types when they differ from the keys' (hot_type / cold_type are then the keys' only).
  std::optional<KvType> hot_type_v;
  std::optional<KvType> cold_type_v;
  KvRotationMode rotation = KvRotationMode::kAuto;  // Hadamard-rotated K/V rows (kv/kv_rotation.h)
  int32_t sink_tokens = 0;                 // the blocks of positions < N stay in hot_type (needs a window)
  uint64_t budget_bytes = 0;               // 0: room for the demand's sequences, capped at 25% of RAM
  bool prefix_caching = false;
  // Disk: on when disk_dir is set. It holds a prefix store (a tier of the prefix cache) and the far
  // tier (running sequences' old blocks).
  std::string disk_dir;
  uint64_t disk_budget_bytes = uint64_t{64} << 30;
  std::string disk_codec = "none";         // none, zstd, lz4
  int32_t disk_level = 1;                  // zstd level / lz4 acceleration
  std::string disk_policy = "lru";         // lru, lfu-decay: RAM eviction and disk drop order
  std::optional<KvType> disk_type;         // none: the arena's type (promoted blocks are bit-identical)
  // Remote tier (kv/remote_tier.h): a Redis shared by replicas; on when remote_url is set.
  std::string remote_url;                  // redis://[user:pass@]host:port[/db] or unix://path
  std::string remote_secret;               // shared by the replicas; keys names and MACs (required)
  int32_t remote_timeout_ms = 100;         // every Redis call
  int32_t remote_deadline_ms = 250;        // the most one admission spends fetching
  uint64_t remote_queue_bytes = uint64_t{256} << 20;  // write-behind queue bound
  int32_t remote_ttl_s = 0;                // 0: no TTL (Redis's maxmemory policy evicts)
  std::string remote_codec = "none";       // none, zstd (less Redis memory per record), lz4
  std::string backend = "cpu";             // whose KV bytes these are (part of the remote fingerprint)

  // Checks every field (errors name the flag) and composes the features for `demand`:
  //  - a disk dir implies prefix caching and a prefix store, except with a hot window: blocks come
  //    back from disk in their cold form only while a new sequence reads its prefix's newest blocks
  //    hot, so the store is off (a warning); the far tier works with any types;
  //  - prefix caching with a hot window retains staging copies for hot attach, out of the budget;
  //  - a remote URL implies prefix caching and the remote tier, which needs a secret; with a hot
  //    window it is off, like the disk prefix store and for the same reason (a warning);
  //  - the far tier needs a pool that holds one running sequence's RAM part, else it is off (a warning).
  //  - keys and values may take different types (K and V planes of their own sizes), except for
  //    MLA's single latent stream (refused);
  //  - int3 / int2 only as the cold type under a hot window (refused as --kv-cache-dtype or
  //    --kv-disk-dtype); sink tokens need a hot window with a cold type other than the hot one
  //    (without one every position is in one type already: refused, so the flag never silently
  //    does nothing); their blocks' staging copies, held by every sequence, come out of the budget.
  Result<KvPlan> validate(const KvDemand& demand) const;
  // The type checks of validate() alone (no demand needed): the engine's flags call it early.
  Status check_types() const;
};

// What the rest of the engine asks of the KV cache: the sizes that decide the default budget, the
// hot retention and the far tier's minimum pool.
struct KvDemand {
  KvGeometry geometry;
  int32_t max_num_seqs = 1;
  int32_t max_model_len = 0;
  int32_t prefill_chunk = 512;
  uint64_t total_ram_bytes = 0;  // caps the default budget at a quarter
};

// The composed configuration: what validate() decided, every decision in one place.
struct KvPlan {
  KvPrecision precision;            // resolved (kv_canonical): a window whose types match is dropped
  int32_t block_tokens = 16;
  bool prefix_caching = false;      // requested, or implied by the prefix store
  bool prefix_store = false;        // disk store of cached prefixes
  bool far_tier = false;            // running sequences' far blocks on disk
  bool remote_tier = false;         // Redis shared by replicas, below RAM and disk
  int32_t hot_blocks = 0;           // blocks a query reads hot besides its own
  uint64_t block_bytes = 0;         // one arena block (the planner's figure)
  uint64_t budget_bytes = 0;        // pool + retained staging
  int32_t retained_blocks = 0;      // staging copies kept for hot attach (out of the budget)
  int32_t sink_blocks = 0;          // per sequence, blocks kept hot as sinks (their staging is out of the budget)
  int32_t num_blocks = 0;           // arena blocks
  std::vector<std::string> warnings;  // decisions the user should hear about (logged by the engine)
};

}  // namespace hz
