#include "tools/engine_flags.h"

#include <unistd.h>

#include "base/byte_size.h"

namespace hz::cli {

void EngineFlags::add_to(CLI::App& app, bool server) {
  app.add_option("-m,--model", opts.model_path, "GGUF model file or Hugging Face folder")->required();
  app.add_option("-t,--threads", opts.threads, "Worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--max-model-len,--ctx", opts.max_model_len, "Tokens per sequence, prompt + output (0 = the model's)");
  app.add_option("--kv-cache-dtype", kv_dtype, "KV cache element type: auto (= f16), f16, f32");
  app.add_option("--block-size", opts.block_size, "Tokens per KV block (16..256, multiple of 16)");
  app.add_option("--kv-budget", kv_budget, "KV cache memory: bytes (4GiB, 512MiB) or a share of RAM (50%)");
  app.add_option("--prefill-chunk", opts.prefill_chunk, "Prompt tokens of one sequence per step");
  if (server) {
    app.add_option("--max-num-seqs", opts.max_num_seqs, "Sequences decoded together");
    app.add_option("--max-num-batched-tokens", opts.max_num_batched_tokens, "Tokens per engine step");
    app.add_option("--max-queue", opts.max_queue, "Waiting requests before new ones get 429");
    app.add_option("--served-model-name", opts.served_model_name, "Model name in API responses");
  }
}

Result<EngineOptions> EngineFlags::resolve() const {
  EngineOptions o = opts;
  if (kv_dtype == "auto" || kv_dtype == "f16" || kv_dtype == "fp16" || kv_dtype == "float16") {
    o.kv_dtype = DType::kF16;
  } else if (kv_dtype == "f32" || kv_dtype == "fp32" || kv_dtype == "float32") {
    o.kv_dtype = DType::kF32;
  } else {
    return invalid_argument("--kv-cache-dtype '{}' is not one of auto, f16, f32", kv_dtype);
  }
  if (!kv_budget.empty()) {
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t avail = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page : 0;
    HZ_ASSIGN_OR_RETURN(o.kv_budget_bytes, parse_byte_size(kv_budget, "--kv-budget", avail));
    if (o.kv_budget_bytes == 0) return invalid_argument("--kv-budget must be more than 0 bytes");
  }
  return o;
}

}  // namespace hz::cli
