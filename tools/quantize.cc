// `horizon quantize IN OUT --type TYPE`: a GGUF (F32/F16/BF16 or quantized) or a Hugging Face folder
// re-encoded into a GGUF, with a progress line on a terminal.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "model/quantizer.h"
#include "tools/cli.h"

namespace hz::cli {
namespace {

struct QuantizeCliOptions {
  std::string in, out;
  std::string type = "q8_0";
  std::string keep_embeddings, keep_output;
  bool quiet = false;
};

constexpr const char* kTypes = "q4_0, q8_0, q4_k, q6_k, f16, bf16, f32";

Result<DType> parse_type(const std::string& flag, const std::string& value) {
  auto t = dtype_from_name(value);
  if (!t || !(*t == DType::kQ4_0 || *t == DType::kQ8_0 || *t == DType::kQ4_K || *t == DType::kQ6_K || *t == DType::kF16 ||
              *t == DType::kBF16 || *t == DType::kF32)) {
    return invalid_argument("{} '{}' is not a type quantize can write (use {})", flag, value, kTypes);
  }
  return *t;
}

int run_quantize(const QuantizeCliOptions& o) {
  QuantizeOptions q;
  auto t = parse_type("--type", o.type);
  if (!t.ok()) return fail(t.status().message());
  q.type = *t;
  if (!o.keep_embeddings.empty()) {
    auto e = parse_type("--keep-embeddings", o.keep_embeddings);
    if (!e.ok()) return fail(e.status().message());
    q.embeddings_type = *e;
  }
  if (!o.keep_output.empty()) {
    auto e = parse_type("--keep-output", o.keep_output);
    if (!e.ok()) return fail(e.status().message());
    q.output_type = *e;
  }
  std::error_code ec;
  if (std::filesystem::equivalent(o.in, o.out, ec)) return fail("the output would overwrite the input: " + o.out);

  const bool tty = !o.quiet && isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  auto progress = [&](size_t done, size_t total) {
    if (!tty || total == 0) return;
    const int width = 30;
    const int filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu tensors (%3d%%)", filled, "##############################", width - filled, "", done,
                 total, static_cast<int>(100 * done / total));
    std::fflush(stderr);
  };
  Status s = quantize_model(o.in, o.out, q, progress);
  if (tty) std::fputc('\n', stderr);
  if (!s.ok()) return fail(s.message());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uintmax_t bytes = std::filesystem::file_size(o.out, ec);
  if (!o.quiet) fmt::print(stderr, "wrote {} ({} bytes, {}) in {:.2f} s\n", o.out, bytes, dtype_name(q.type), secs);
  return 0;
}

Subcommand kQuantize("quantize", "Re-encode a GGUF or Hugging Face folder into a GGUF (q4_0, q8_0, q4_k, q6_k, f16, bf16)", [](CLI::App& app) {
  auto o = std::make_shared<QuantizeCliOptions>();
  app.add_option("input", o->in, "GGUF file or Hugging Face folder")->required();
  app.add_option("output", o->out, "GGUF file to write")->required();
  app.add_option("--type", o->type, fmt::format("Type of the weight matrices ({})", kTypes));
  app.add_option("--keep-embeddings", o->keep_embeddings, "Type of token_embd.weight (default: --type)");
  app.add_option("--keep-output", o->keep_output, "Type of output.weight (default: --type)");
  app.add_flag("-q,--quiet", o->quiet, "No progress or summary");
  return [o] { return run_quantize(*o); };
});

}  // namespace
}  // namespace hz::cli
