#include "tools/engine_flags.h"

#include <unistd.h>

#include <cctype>

#include "base/byte_size.h"
#include "model/rope_scaling.h"
#include "tools/device_flag.h"

namespace hz::cli {

void EngineFlags::add_to(CLI::App& app, bool server) {
  app.add_option("-m,--model", opts.model_path, "GGUF model file or Hugging Face folder")->required();
  app.add_option("-t,--threads", opts.threads, "Worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--max-model-len,--ctx", opts.max_model_len, "Tokens per sequence, prompt + output (0 = the model's)");
  app.add_option("--kv-cache-dtype", kv_dtype,
                 "KV cache element type: auto (= f16), f32, f16, bf16, fp8 (fp8_e4m3), int8 (q8_0), int4 (q4_0)");
  app.add_option("--kv-hot-window", opts.kv_hot_window,
                 "Keep the newest N tokens in --kv-cache-dtype, older blocks in --kv-cold-dtype (0 = off)");
  app.add_option("--kv-cold-dtype", kv_cold_dtype, "KV element type of blocks beyond --kv-hot-window (default int8)");
  app.add_flag("--enable-prefix-caching", opts.enable_prefix_caching,
               "Reuse the KV blocks of prompt prefixes seen before (full blocks, LRU eviction)");
  app.add_option("--block-size", opts.block_size, "Tokens per KV block (16..256, multiple of 16)");
  app.add_option("--kv-budget", kv_budget, "KV cache memory: bytes (4GiB, 512MiB) or a share of RAM (50%)");
  app.add_option("--prefill-chunk", opts.prefill_chunk, "Prompt tokens of one sequence per step");
  app.add_option("--kv-disk-dir", opts.kv_disk_dir,
                 "Disk tier of the prefix cache: blocks evicted from RAM go to a store in DIR, prefixes survive restarts "
                 "(implies --enable-prefix-caching)");
  app.add_option("--kv-disk-budget", kv_disk_budget, "Disk tier size: bytes (64GiB, 512MiB)");
  app.add_option("--kv-disk-codec", opts.kv_disk_codec, "Disk tier compression: none, zstd or lz4 (default none: KV compresses by 3-18% with zstd, nothing with lz4; zstd pays on slow disks)");
  app.add_option("--kv-disk-dtype", kv_disk_dtype,
                 "KV element type on disk: same (the cache's: promoted blocks are bit-identical) or a type to re-quantize "
                 "to (e.g. int8: smaller, lossy)");
  app.add_option("--kv-disk-level", opts.kv_disk_level, "zstd level or lz4 acceleration (default 1)");
  app.add_option("--kv-disk-policy", opts.kv_disk_policy,
                 "Which block leaves a KV tier first (RAM -> disk, disk -> dropped): lru or lfu-decay (access count with exponential decay plus recency)");
  // ---- RoPE scaling flags (architectures, issue 8) ----
  app.add_option("--rope-scaling", rope_scaling, "RoPE context extension: none, linear, ntk, yarn, llama3 (default: the model's)");
  app.add_option("--rope-freq-base", rope_freq_base, "RoPE base frequency (default: the model's)");
  app.add_option("--rope-freq-scale", rope_freq_scale, "RoPE frequency scale = 1 / context extension factor (default: the model's)");
  app.add_option("--yarn-orig-ctx", yarn_orig_ctx, "Original training context for YaRN / llama3 scaling (default: the model's)");
  // ---- end RoPE scaling flags ----
  add_device_flag(app, device);
  if (server) {
    app.add_option("--max-num-seqs", opts.max_num_seqs, "Sequences decoded together");
    app.add_option("--max-num-batched-tokens", opts.max_num_batched_tokens, "Tokens per engine step");
    app.add_option("--max-queue", opts.max_queue, "Waiting requests before new ones get 429");
    app.add_option("--served-model-name", opts.served_model_name, "Model name in API responses");
  }
}

Result<EngineOptions> EngineFlags::resolve() const {
  EngineOptions o = opts;
  HZ_RETURN_IF_ERROR(check_device_flag(device));
  HZ_ASSIGN_OR_RETURN(o.kv_dtype, parse_kv_type(kv_dtype, "--kv-cache-dtype"));
  HZ_ASSIGN_OR_RETURN(o.kv_cold_dtype, parse_kv_type(kv_cold_dtype, "--kv-cold-dtype"));
  if (o.kv_hot_window < 0) return invalid_argument("--kv-hot-window must be 0 or more, got {}", o.kv_hot_window);
  if (!kv_budget.empty()) {
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t avail = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page : 0;
    HZ_ASSIGN_OR_RETURN(o.kv_budget_bytes, parse_byte_size(kv_budget, "--kv-budget", avail));
    if (o.kv_budget_bytes == 0) return invalid_argument("--kv-budget must be more than 0 bytes");
  }
  if (!opts.kv_disk_dir.empty()) {
    HZ_ASSIGN_OR_RETURN(o.kv_disk_budget_bytes, parse_byte_size(kv_disk_budget, "--kv-disk-budget", 0));
    if (o.kv_disk_budget_bytes == 0) return invalid_argument("--kv-disk-budget must be more than 0 bytes");
    if (o.kv_disk_codec != "zstd" && o.kv_disk_codec != "lz4" && o.kv_disk_codec != "none")
      return invalid_argument("--kv-disk-codec '{}' is not one of zstd, lz4, none", o.kv_disk_codec);
    if (kv_disk_dtype != "same") {
      HZ_ASSIGN_OR_RETURN(KvType t, parse_kv_type(kv_disk_dtype, "--kv-disk-dtype"));
      o.kv_disk_dtype = t;
    }
    if (o.kv_disk_policy != "lru" && o.kv_disk_policy != "lfu-decay")
      return invalid_argument("--kv-disk-policy '{}' is not one of lru, lfu-decay", o.kv_disk_policy);
  }
  // ---- RoPE scaling flags (architectures, issue 8) ----
  RopeOverrides& ro = o.model_overrides.rope;
  if (!rope_scaling.empty()) {
    HZ_ASSIGN_OR_RETURN(RopeScaling sc, parse_rope_scaling(rope_scaling, "--rope-scaling"));
    ro.scaling = sc;
  }
  if (rope_freq_base != 0) {
    if (!(rope_freq_base > 1)) return invalid_argument("--rope-freq-base {} must be > 1", rope_freq_base);
    ro.freq_base = rope_freq_base;
  }
  if (rope_freq_scale != 0) {
    if (!(rope_freq_scale > 0)) return invalid_argument("--rope-freq-scale {} must be > 0", rope_freq_scale);
    ro.freq_scale = rope_freq_scale;
  }
  if (yarn_orig_ctx != 0) {
    if (yarn_orig_ctx < 0) return invalid_argument("--yarn-orig-ctx {} must be > 0", yarn_orig_ctx);
    ro.orig_ctx = yarn_orig_ctx;
  }
  // ---- end RoPE scaling flags ----
  return o;
}

Result<KvType> parse_kv_type(const std::string& name, const char* flag) {
  std::string n = name;
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "auto" || n == "fp16" || n == "float16") return KvType::kF16;
  if (n == "fp32" || n == "float32") return KvType::kF32;
  if (n == "q8_0") return KvType::kInt8;
  if (n == "q4_0") return KvType::kInt4;
  if (auto t = kv_type_from_name(n)) return *t;
  return invalid_argument("{} '{}' is not one of auto, f32, f16, bf16, fp8, fp8_e4m3, int8, q8_0, int4, q4_0", flag,
                          name);
}

}  // namespace hz::cli
