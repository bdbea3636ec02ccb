#include "tools/compat_args.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

namespace hz::cli {
namespace {

// llama.cpp's multi-letter short flags (CLI11 would read "-np" as "-n p").
constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kShortSpellings = {{
    {"-np", "--parallel"},
    {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"},
    {"-fa", "--flash-attn"},
    {"-ngl", "--n-gpu-layers"},
    {"-cb", "--cont-batching"},
    {"-nkvo", "--no-kv-offload"},
    {"-ub", "--ubatch-size"},
    {"-tb", "--threads-batch"},
    {"-cnv", "--conversation"},  // llama-cli's (for a hint: CLI11 would read "-c nv")
    {"-to", "--timeout"},        // llama-server's (CLI11 would read "-t o")
}};

struct Hint {
  std::string_view flag;
  std::string_view text;
};

// Flags of llama-server and vLLM that horizon does not take, with what to do instead.
constexpr Hint kHints[] = {
    {"--no-kv-offload", "the KV cache is in RAM here; drop the flag"},
    {"--ubatch-size", "use --prefill-chunk N (prompt tokens of one sequence per step)"},
    {"--batch-size", "use --max-num-batched-tokens N (tokens per engine step)"},
    {"-b", "use --max-num-batched-tokens N (tokens per engine step)"},
    {"--threads-batch", "use -t/--threads N (one pool serves prefill and decode)"},
    {"--chat-template-file", "use --chat-template FILE"},
    {"--mlock", "weights are memory-mapped; drop the flag"},
    {"--no-mmap", "weights are always memory-mapped; drop the flag"},
    {"--numa", "drop the flag; pin with numactl if needed"},
    {"--timeout", "use --request-timeout SECONDS"},
    {"--api-key-file", "use --api-key KEY or the HORIZON_API_KEY environment variable"},
    {"--ssl-key-file", "serve plain HTTP on loopback and put a TLS proxy in front"},
    {"--ssl-certfile", "serve plain HTTP on loopback and put a TLS proxy in front"},
    {"--ssl-keyfile", "serve plain HTTP on loopback and put a TLS proxy in front"},
    {"--slots", "slot state is internal; see /metrics"},
    {"--cache-reuse", "use --enable-prefix-caching"},
    {"--swap-space", "use --kv-disk-dir DIR --kv-disk-budget SIZE (a disk tier for the KV cache)"},
    {"--cpu-offload-gb", "the model runs on the CPU; drop the flag"},
    {"--kv-cache-memory", "use --kv-budget SIZE"},
    {"--kv-cache-memory-bytes", "use --kv-budget SIZE"},
    {"--tensor-parallel-size", "one process serves on one machine; drop the flag"},
    {"-tp", "one process serves on one machine; drop the flag"},
    {"--pipeline-parallel-size", "one process serves on one machine; drop the flag"},
    {"--quantization", "weights keep the file's type (pre-quantized fp8, gptq and awq folders are read from config.json); "
                       "convert with `horizon quantize --type TYPE`"},
    {"--tokenizer", "the tokenizer is read from the model (GGUF or tokenizer.json in the folder)"},
    {"--max-num-batched-tokens", "give it after `serve` (it is a server flag)"},
    {"--disable-log-stats", "use --disable-log-requests"},
    {"--uvicorn-log-level", "set HORIZON_LOG=debug|info|warn|error"},
    {"--log-disable", "set HORIZON_LOG=error"},
    {"--verbose", "set HORIZON_LOG=debug"},
    {"--n-predict", "give max_tokens in the request (or -n with `horizon run`)"},
    {"--seed", "give seed in the request (or --seed with `horizon run`)"},
    {"--lora", "LoRA adapters are not supported; merge them into the weights first"},
    {"--lora-modules", "LoRA adapters are not supported; merge them into the weights first"},
    {"--mmproj", "multimodal projectors are not supported"},
    {"--download-dir", "download the model first (see the README), then give its path"},
    {"--revision", "download the revision first (see the README), then give its path"},
    {"--hf-repo", "download the model first (see the README), then give its path"},
    {"-hf", "download the model first (see the README), then give its path"},
    {"--max-seq-len-to-capture", "there is no graph capture here; drop the flag"},
    {"--rope-scale", "use --rope-freq-scale"},
    {"--defrag-thold", "the paged KV cache needs no defragmentation; drop the flag"},
    {"--max-logprobs", "top_logprobs is at most 20 per request; drop the flag"},
    {"--disable-frontend-multiprocessing", "HTTP threads and the engine thread are one process; drop the flag"},
    {"--chat-template-content-format", "message content (string or parts) is handled by the server; drop the flag"},
    {"--task", "this server generates (and embeds with --embeddings); drop the flag"},
    {"--no-webui", "the web page at / is read-only and needs no flag; drop it"},
    {"--threads-http", "use --http-threads N"},
    {"--conversation", "use `horizon chat -m MODEL` for a conversation"},
};

std::string flag_name(const std::string& arg) {
  size_t eq = arg.find('=');
  return eq == std::string::npos ? arg : arg.substr(0, eq);
}

bool is_flash_attn_value(const std::string& v) {
  for (const char* ok : {"on", "off", "auto", "true", "false", "1", "0", "enabled", "disabled"})
    if (v == ok) return true;
  return false;
}

}  // namespace

std::vector<std::string> rewrite_compat_args(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size() + 1);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    const std::string name = flag_name(a);
    for (const auto& [from, to] : kShortSpellings) {
      if (name == from) {
        a = std::string(to) + a.substr(name.size());
        break;
      }
    }
    out.push_back(a);
    if (a == "--flash-attn" && (i + 1 >= args.size() || !is_flash_attn_value(args[i + 1]))) out.push_back("on");
  }
  return out;
}

std::string compat_hint(const std::string& arg) {
  const std::string name = flag_name(arg);
  for (const Hint& h : kHints) {
    if (name == h.flag) return std::string(h.text);
  }
  return "";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace hz::cli
