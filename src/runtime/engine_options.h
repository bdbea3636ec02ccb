// EngineOptions: every setting of the in-process engine (model, threads, KV cache, scheduler),
// listed once; the CLI of run, serve and bench maps its flags onto this struct.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "kv/kv_options.h"
#include "model/model_overrides.h"
#include "kv/kv_layout.h"
#include "tensor/dtype.h"

namespace hz {

class Drafter;  // runtime/drafter.h
namespace cuda {
class Backend;  // kernels/cuda/backend.h
}

enum class SpecMode { kOff, kNgram };

// Where the model runs: the CPU kernels, the CUDA backend (--device cuda), or the host emulation
// of the CUDA backend (tests of the GPU path on machines without a GPU).
enum class EngineDevice { kCpu, kCuda, kHostEmulation };

struct EngineOptions {
  std::string model_path;
  std::string served_model_name;   // default: the model file's name
  EngineDevice device = EngineDevice::kCpu;
  int32_t threads = 0;             // 0: all hardware threads
  int32_t max_model_len = 0;       // 0: the model's training context
  ModelOverrides model_overrides;  // metadata the user overrides (RoPE scaling flags)
  // KV cache.
  int32_t block_size = 16;         // tokens per KV block (16..256, multiple of 16)
  KvType kv_dtype = KvType::kF16;  // the hot type: the newest kv_hot_window tokens, or all of them
  int32_t kv_hot_window = 0;       // 0: one type for every position
  KvType kv_cold_dtype = KvType::kInt8;  // blocks older than the hot window
  // Values' types when they differ from the keys' (kv_dtype / kv_cold_dtype are then the keys').
  std::optional<KvType> kv_dtype_v;
  std::optional<KvType> kv_cold_dtype_v;
  KvRotationMode kv_rotation = KvRotationMode::kAuto;  // Hadamard-rotated K/V (kv/kv_rotation.h)
  int32_t kv_sink_tokens = 0;      // the blocks of positions < N stay in the hot type (needs a hot window)
  bool enable_prefix_caching = false;
  uint64_t kv_budget_bytes = 0;    // 0: room for max_num_seqs full-length sequences, capped at 25% of RAM
  // Disk tier (kv/disk_tier.h): on when kv_disk_dir is set; implies prefix caching.
  std::string kv_disk_dir;
  uint64_t kv_disk_budget_bytes = uint64_t{64} << 30;
  std::string kv_disk_codec = "none";  // none, zstd, lz4 (see kvstore/block_codec.h for the measurements)
  int32_t kv_disk_level = 1;           // zstd level / lz4 acceleration
  std::string kv_disk_policy = "lru";  // lru, lfu-decay
  std::optional<KvType> kv_disk_dtype; // none: the arena's type (promoted blocks are bit-identical)
  // Remote tier (kv/remote_tier.h): a Redis shared by replicas; on when kv_remote is set.
  std::string kv_remote;               // redis://[user:pass@]host:port[/db] or unix://path
  std::string kv_remote_secret;        // required with kv_remote
  int32_t kv_remote_timeout_ms = 100;
  int32_t kv_remote_deadline_ms = 250;
  int32_t kv_remote_ttl_s = 0;
  std::string kv_remote_codec = "none";
  // Scheduler.
  int32_t max_num_seqs = 8;
  int32_t max_num_batched_tokens = 512;
  int32_t prefill_chunk = 512;
  int32_t prefill_with_decode = 128;  // prompt tokens in a step that also decodes (0 = the budget)
  int32_t max_queue = 64;          // waiting requests beyond the running batch
  // Speculative decoding (runtime/drafter.h): drafts verified in one forward pass; the output is
  // the same (greedy: token for token; sampled: in distribution). Off for requests with a grammar.
  SpecMode spec = SpecMode::kOff;
  int32_t spec_draft_tokens = 4;   // tokens proposed per step at most
  int32_t spec_ngram_max = 16;     // prompt lookup: longest agreement looked for
  int32_t spec_ngram_min = 2;      // and the shortest
  // Drafts shorten after rejections and pause after misses (a wrong draft costs compute on small
  // models); off: always spec_draft_tokens when the drafter has them (benchmarks of the rule).
  bool spec_adaptive = true;
  // Check the hidden state after every stage of every layer for NaN and infinities (CPU only; a
  // pass over the activations per layer): a request whose logits come out non-finite then fails
  // naming the first layer and stage that produced them. Without it the logits alone are checked.
  bool check_finite = false;
  // Benchmarks and tests: a drafter other than --spec's (e.g. an oracle); used for every request
  // without a grammar. Set before the engine starts; used on its thread only.
  std::shared_ptr<Drafter> drafter;
};

// The KV cache's settings among them (kv/kv_options.h).
// TODO: hold a KvOptions in EngineOptions instead of the flat kv_* fields once the CLI maps onto it.
KvOptions kv_options(const EngineOptions& o);
// The KV precision those settings resolve to (types, window, sinks, rotation; kv_canonical), for
// the tools that build a KV cache without a KvManager (bench engine, perplexity, plan).
KvPrecision kv_precision(const EngineOptions& o);
// The backend of a device other than the CPU: the CUDA backend (errors say why it cannot run,
// naming --device cuda) or its host emulation.
Result<std::unique_ptr<cuda::Backend>> make_device_backend(EngineDevice device);

}  // namespace hz
