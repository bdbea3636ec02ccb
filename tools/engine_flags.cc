#include "tools/engine_flags.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "base/byte_size.h"
#include "base/log.h"
#include "model/rope_scaling.h"
#include "tools/device_flag.h"

namespace hz::cli {

void EngineFlags::add_to(CLI::App& app, bool with_server_flags) {
  server = with_server_flags;
  app.add_option("MODEL", model_positional, "GGUF model file or Hugging Face folder (same as -m)");
  app.add_option("-m,--model", opts.model_path, "GGUF model file or Hugging Face folder");
  app.add_option("-t,--threads", opts.threads, "Worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--max-model-len,--ctx", opts.max_model_len, "Tokens per sequence, prompt + output (0 = the model's)");
  if (server) {
    app.add_option("-c,--ctx-size", total_ctx,
                   "Tokens of all sequences together, shared by --max-num-seqs (llama-server's meaning: -c 8192 -np 4 "
                   "gives 2048 per sequence)");
  } else {
    app.add_option("-c,--ctx-size", total_ctx, "Context size in tokens (llama.cpp's -c; here the same as --max-model-len)");
  }
  app.add_option("--kv-cache-dtype", kv_dtype,
                 "KV cache element type: auto (= f16), f32, f16, bf16, fp8 (fp8_e4m3), int8 (q8_0), int4 (q4_0), "
                 "int8c / int4c (8 / 4 bits with a scale and an offset per channel of each 16-token block: 9 / 5 "
                 "bits per value, far more accurate than int8 / int4, above all where keys have outlier channels); "
                 "int3 and int2 only as --kv-cold-dtype");
  app.add_option("--kv-cache-dtype-k,--cache-type-k", kv_dtype_k,
                 "KV element type of keys only (llama.cpp's -ctk; q8_0 = int8, q4_0 = int4); default --kv-cache-dtype");
  app.add_option("--kv-cache-dtype-v,--cache-type-v", kv_dtype_v,
                 "KV element type of values only (-ctv); default --kv-cache-dtype. Keys carry the outlier channels: "
                 "e.g. --kv-cache-dtype-k int8c --kv-cache-dtype-v int4c");
  app.add_option("--kv-hot-window", opts.kv_hot_window,
                 "Keep the newest N tokens in --kv-cache-dtype, older blocks in --kv-cold-dtype (0 = off)");
  app.add_option("--kv-cold-dtype", kv_cold_dtype,
                 "KV element type of blocks beyond --kv-hot-window (default int8; needs --kv-hot-window): any type, "
                 "or int3 / int2 (scaled per channel like int4c: 4 / 3 bits per value with scales in 16-token "
                 "blocks)");
  app.add_option("--kv-cold-dtype-k", kv_cold_dtype_k, "Cold KV element type of keys only (default --kv-cold-dtype)");
  app.add_option("--kv-cold-dtype-v", kv_cold_dtype_v,
                 "Cold KV element type of values only (default --kv-cold-dtype): values tolerate fewer bits than keys, "
                 "e.g. --kv-cold-dtype-k int3 --kv-cold-dtype-v int2");
  app.add_option("--kv-sink-tokens", opts.kv_sink_tokens,
                 "Keep the first N positions of every sequence in --kv-cache-dtype however old (attention sinks; "
                 "needs --kv-hot-window and a --kv-cold-dtype). Whole blocks: the blocks holding positions < N are "
                 "never converted to the cold type, so with 16-token blocks 1..16 keep positions 0-15 "
                 "(default 0)");
  app.add_option("--kv-rotation", kv_rotation,
                 "Store K and V rotated by a fixed random-sign Hadamard transform per head, which spreads outlier "
                 "channels before quantizing: auto (default: on for int8 and int4, where it lowers the error; off "
                 "for fp8 and the per-channel types int8c, int4c, int3 and int2, where it raises it), on, off");
  app.add_flag("--enable-prefix-caching", opts.enable_prefix_caching,
               "Reuse the KV blocks of prompt prefixes seen before (full blocks, LRU eviction)");
  app.add_option("--block-size,--kv-block-size", opts.block_size, "Tokens per KV block (16..256, multiple of 16)");
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
  app.add_option("--kv-remote", opts.kv_remote,
                 "Remote tier of the prefix cache shared by replicas: redis://[user:pass@]host:port[/db] or unix://path "
                 "(implies --enable-prefix-caching; needs --kv-remote-secret)");
  app.add_option("--kv-remote-secret", opts.kv_remote_secret,
                 "Secret shared by the replicas (16+ characters) that keys block names and record MACs; default: the "
                 "HORIZON_KV_REMOTE_SECRET environment variable (preferred: a flag shows in the process list)");
  app.add_option("--kv-remote-timeout", opts.kv_remote_timeout_ms, "Timeout of every Redis call, in ms (default 100)");
  app.add_option("--kv-remote-deadline", opts.kv_remote_deadline_ms,
                 "The most one request's admission spends fetching its prefix from Redis, in ms (default 250)");
  app.add_option("--kv-remote-codec", opts.kv_remote_codec,
                 "Compression of records in Redis: none (default, fastest) or zstd (a few % smaller, which keeps a "
                 "record under the allocator size class it would just exceed: ~20% less Redis memory)");
  app.add_option("--kv-remote-ttl", opts.kv_remote_ttl_s,
                 "Seconds a record lives in Redis (default 0: until Redis's maxmemory policy evicts it)");
  app.add_option("--spec", spec,
                 "Speculative decoding: off, or ngram (prompt lookup: drafts are continuations of earlier text in the "
                 "context, verified in one batched step; same output, faster on repetitive text; off for requests "
                 "with a grammar)");
  app.add_option("--spec-draft", opts.spec_draft_tokens, "Tokens drafted per step at most with --spec (default 4)");
  app.add_option("--spec-ngram-max", opts.spec_ngram_max, "--spec ngram: longest suffix looked up in the context (default 16)");
  app.add_option("--spec-ngram-min", opts.spec_ngram_min, "--spec ngram: shortest suffix looked up (default 2)");
  app.add_flag("--quiet", quiet, "No progress output (loading, long work) and no start-up summary");
  app.add_flag("--check-finite", opts.check_finite,
               "Check every layer's activations for NaN and infinities (slower; CPU only): a request whose logits "
               "come out non-finite then fails naming the first layer and stage that produced them (the logits are "
               "always checked)");
  // Flags of GPU servers, accepted so their command lines run here (one warning each).
  app.add_option("--flash-attn", flash_attn, "Accepted for llama-server command lines (-fa); attention is always fused here");
  app.add_option("--n-gpu-layers,--gpu-layers", n_gpu_layers, "Accepted for llama-server command lines (-ngl); no effect on the CPU");
  app.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                 "Accepted for vLLM command lines; no effect on the CPU (the KV memory is --kv-budget)");
  // ---- RoPE scaling flags (context extension) ----
  app.add_option("--rope-scaling", rope_scaling, "RoPE context extension: none, linear, ntk, yarn, llama3 (default: the model's)");
  app.add_option("--rope-freq-base", rope_freq_base, "RoPE base frequency (default: the model's)");
  app.add_option("--rope-freq-scale", rope_freq_scale, "RoPE frequency scale = 1 / context extension factor (default: the model's)");
  app.add_option("--yarn-orig-ctx", yarn_orig_ctx, "Original training context for YaRN / llama3 scaling (default: the model's)");
  // ---- end RoPE scaling flags ----
  add_device_flag(app, device);
  if (server) {
    app.add_option("--max-num-seqs,--parallel", opts.max_num_seqs, "Sequences decoded together (llama-server: -np)");
    app.add_option("--max-num-batched-tokens", opts.max_num_batched_tokens, "Tokens per engine step");
    app.add_option("--prefill-while-decoding", opts.prefill_with_decode,
                   "Prompt tokens in a step that also decodes (default 128; 0 = up to --max-num-batched-tokens): "
                   "bounds the pause between two streamed tokens while other prompts prefill");
    app.add_option("--max-queue", opts.max_queue, "Requests that may wait beyond the running ones (--max-num-seqs) before new ones get 429 (0: none wait)");
    app.add_option("--served-model-name,--alias", opts.served_model_name,
                   "Model name in API responses (llama-server: --alias)");
  }
}

namespace {

// Bytes the disk tier can use in `dir`: the free space of its file system (of the nearest folder
// that exists) plus what files already in `dir` hold (a store reopened keeps its slots). 0 when
// unknown.
uint64_t usable_disk_bytes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  struct statvfs st {};
  if (p.empty() || statvfs(p.c_str(), &st) != 0) return 0;
  uint64_t bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file(ec)) bytes += e.file_size(ec);
    }
  }
  return bytes;
}

}  // namespace

Result<EngineOptions> EngineFlags::resolve(bool need_model) const {
  EngineOptions o = opts;
  if (!model_positional.empty()) {
    if (!o.model_path.empty() && o.model_path != model_positional)
      return invalid_argument("the model is given twice: '{}' and -m '{}'", model_positional, o.model_path);
    o.model_path = model_positional;
  }
  if (need_model && o.model_path.empty()) return invalid_argument("no model: give MODEL or -m MODEL (a GGUF file or Hugging Face folder)");
  if (total_ctx != 0) {
    if (total_ctx < 0) return invalid_argument("-c/--ctx-size must be more than 0, got {}", total_ctx);
    if (opts.max_model_len != 0)
      return invalid_argument("-c/--ctx-size {} and --max-model-len {}: give one", total_ctx, opts.max_model_len);
    // One sequence unless the command schedules many (serve, plan).
    const int32_t seqs = server ? std::max<int32_t>(opts.max_num_seqs, 1) : 1;
    o.max_model_len = total_ctx / seqs;
    if (o.max_model_len < 1)
      return invalid_argument("-c/--ctx-size {} shared by {} sequences leaves no context per sequence", total_ctx, seqs);
  }
  if (o.block_size < 16 || o.block_size > 256 || o.block_size % 16 != 0)
    return invalid_argument("--block-size {} must be a multiple of 16 between 16 and 256", o.block_size);
  HZ_ASSIGN_OR_RETURN(o.device, resolve_device_flag(device));
  if (spec == "off" || spec == "none") {
    o.spec = SpecMode::kOff;
  } else if (spec == "ngram") {
    o.spec = SpecMode::kNgram;
  } else {
    return invalid_argument("--spec '{}' is not one of off, ngram", spec);
  }
  HZ_ASSIGN_OR_RETURN(o.kv_dtype, parse_kv_type(kv_dtype, "--kv-cache-dtype"));
  // Keys and values: --kv-cache-dtype for both, -k / -v for one of them (llama.cpp's -ctk / -ctv,
  // whose default for the one not given is f16, as --kv-cache-dtype's).
  KvType hot_v = o.kv_dtype;
  if (!kv_dtype_k.empty()) {
    HZ_ASSIGN_OR_RETURN(o.kv_dtype, parse_kv_type(kv_dtype_k, "--kv-cache-dtype-k"));
  }
  if (!kv_dtype_v.empty()) {
    HZ_ASSIGN_OR_RETURN(hot_v, parse_kv_type(kv_dtype_v, "--kv-cache-dtype-v"));
  }
  if (hot_v != o.kv_dtype) o.kv_dtype_v = hot_v;
  const bool cold_given = !kv_cold_dtype.empty() || !kv_cold_dtype_k.empty() || !kv_cold_dtype_v.empty();
  if (cold_given) {
    const char* flag = !kv_cold_dtype.empty() ? "--kv-cold-dtype" : !kv_cold_dtype_k.empty() ? "--kv-cold-dtype-k" : "--kv-cold-dtype-v";
    if (opts.kv_hot_window == 0) return invalid_argument("{} needs --kv-hot-window N", flag);
    if (!kv_cold_dtype.empty()) {
      HZ_ASSIGN_OR_RETURN(o.kv_cold_dtype, parse_kv_type(kv_cold_dtype, "--kv-cold-dtype"));
    }
    KvType cold_v = o.kv_cold_dtype;
    if (!kv_cold_dtype_k.empty()) {
      HZ_ASSIGN_OR_RETURN(o.kv_cold_dtype, parse_kv_type(kv_cold_dtype_k, "--kv-cold-dtype-k"));
    }
    if (!kv_cold_dtype_v.empty()) {
      HZ_ASSIGN_OR_RETURN(cold_v, parse_kv_type(kv_cold_dtype_v, "--kv-cold-dtype-v"));
    }
    if (cold_v != o.kv_cold_dtype) o.kv_cold_dtype_v = cold_v;
  }
  HZ_ASSIGN_OR_RETURN(o.kv_rotation, parse_kv_rotation(kv_rotation, "--kv-rotation"));
  if (!flash_attn.empty()) {
    static const char* kValues[] = {"on", "off", "auto", "true", "false", "1", "0", "enabled", "disabled"};
    if (std::find(std::begin(kValues), std::end(kValues), flash_attn) == std::end(kValues))
      return invalid_argument("--flash-attn '{}' is not one of on, off, auto", flash_attn);
    HZ_LOG_WARN("-fa/--flash-attn has no effect: attention here is always fused (tiled, online softmax)");
  }
  if (n_gpu_layers >= 0) HZ_LOG_WARN("-ngl/--n-gpu-layers has no effect: this build runs the model on the CPU");
  if (gpu_memory_utilization >= 0) {
    if (gpu_memory_utilization > 1) return invalid_argument("--gpu-memory-utilization {} must be between 0 and 1", gpu_memory_utilization);
    HZ_LOG_WARN("--gpu-memory-utilization has no effect on the CPU: the KV cache memory is --kv-budget (bytes or a share of RAM)");
  }
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
    // A budget past the free space would be planned for, then fail in the middle of a request:
    // plan with what the disk has, so admission refuses what cannot fit.
    if (const uint64_t usable = usable_disk_bytes(opts.kv_disk_dir); usable > 0 && o.kv_disk_budget_bytes > usable) {
      HZ_LOG_WARN("--kv-disk-budget {} is more than the {} free for {}; the disk tier plans with {}",
                  format_bytes(o.kv_disk_budget_bytes), format_bytes(usable), opts.kv_disk_dir, format_bytes(usable));
      o.kv_disk_budget_bytes = usable;
    }
    if (o.kv_disk_codec != "zstd" && o.kv_disk_codec != "lz4" && o.kv_disk_codec != "none")
      return invalid_argument("--kv-disk-codec '{}' is not one of zstd, lz4, none", o.kv_disk_codec);
    if (kv_disk_dtype != "same") {
      HZ_ASSIGN_OR_RETURN(KvType t, parse_kv_type(kv_disk_dtype, "--kv-disk-dtype"));
      o.kv_disk_dtype = t;
    }
    if (o.kv_disk_policy != "lru" && o.kv_disk_policy != "lfu-decay")
      return invalid_argument("--kv-disk-policy '{}' is not one of lru, lfu-decay", o.kv_disk_policy);
  }
  if (!opts.kv_remote.empty() && o.kv_remote_secret.empty()) {
    if (const char* env = std::getenv("HORIZON_KV_REMOTE_SECRET")) o.kv_remote_secret = env;
  }
  HZ_RETURN_IF_ERROR(kv_options(o).check_types());  // int3/int2 only as cold types, sinks need a window
  // ---- RoPE scaling flags (context extension) ----
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
  return invalid_argument("{} '{}' is not one of auto, f32, f16, bf16, fp8, fp8_e4m3, int8, q8_0, int8c, int4, q4_0, int4c, int3, int2",
                          flag,
                          name);
}

}  // namespace hz::cli
