// `horizon quantize IN OUT --type TYPE`: a GGUF (F32/F16/BF16 or quantized) or a Hugging Face folder
// re-encoded into a GGUF, with a progress line on a terminal.
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "model/quantizer.h"
#include "base/byte_size.h"
#include "tools/cli.h"
#include "tools/progress.h"

namespace hz::cli {
namespace {

struct QuantizeCliOptions {
  std::string in, out;
  std::string type = "q8_0";
  std::string keep_embeddings, keep_output;
  bool quiet = false;
};

constexpr const char* kTypes = "q4_k_m, q4_k_s, q5_k_m, q5_k_s (llama.cpp's mixes), q4_0, q8_0, q4_k, q5_k, q6_k, f16, bf16, f32";

// One type for every matrix.
Result<DType> parse_type(const std::string& flag, const std::string& value) {
  auto t = dtype_from_name(value);
  if (!t || !(*t == DType::kQ4_0 || *t == DType::kQ8_0 || *t == DType::kQ4_K || *t == DType::kQ5_K || *t == DType::kQ6_K ||
              *t == DType::kF16 || *t == DType::kBF16 || *t == DType::kF32)) {
    return invalid_argument("{} '{}' is not a type quantize can write (use {})", flag, value, kTypes);
  }
  return *t;
}

// --type: a mix name (its base type and rules) or one type.
Status parse_mix_or_type(const std::string& value, QuantizeOptions* q) {
  std::string v = value;
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Mix {
    const char* name;
    QuantMix mix;
    DType base;
  };
  for (const Mix& m : {Mix{"q4_k_m", QuantMix::kQ4_K_M, DType::kQ4_K}, Mix{"q4_k_s", QuantMix::kQ4_K_S, DType::kQ4_K},
                       Mix{"q5_k_m", QuantMix::kQ5_K_M, DType::kQ5_K}, Mix{"q5_k_s", QuantMix::kQ5_K_S, DType::kQ5_K}}) {
    if (v == m.name) {
      q->mix = m.mix;
      q->type = m.base;
      return Status();
    }
  }
  if (v == "q2_k" || v == "q3_k_s" || v == "q3_k_m" || v == "q3_k_l" || v.rfind("iq", 0) == 0 || v == "q4_1" || v == "q5_0" ||
      v == "q5_1")
    return invalid_argument("--type '{}' is not written by horizon (use {})", value, kTypes);
  HZ_ASSIGN_OR_RETURN(q->type, parse_type("--type", value));
  return Status();
}

int run_quantize(const QuantizeCliOptions& o) {
  QuantizeOptions q;
  Status ts = parse_mix_or_type(o.type, &q);
  if (!ts.ok()) return fail(ts.message());
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

  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ProgressBar> bar;
  auto progress = [&](size_t done, size_t total) {
    if (!bar) bar = std::make_unique<ProgressBar>("quantizing tensors", total, ProgressBar::Unit::kCount, o.quiet);
    bar->update(done);
  };
  QuantizeSummary summary;
  Status s = quantize_model(o.in, o.out, q, progress, &summary);
  if (bar) bar->finish();
  if (!s.ok()) return fail(s.message());
  if (o.quiet) return 0;
  for (const auto& w : summary.warnings) fmt::print(stderr, "warning: {}\n", w);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uintmax_t bytes = std::filesystem::file_size(o.out, ec);
  fmt::print(stderr, "wrote {} ({} bytes, {}) in {:.2f} s:\n", o.out, bytes, o.type, secs);
  for (const auto& r : summary.by_type)
    fmt::print(stderr, "  {:<5} {:>4} tensor{} {}\n", dtype_name(r.type), r.num_tensors, r.num_tensors == 1 ? " " : "s",
               format_bytes(r.bytes));
  return 0;
}

Subcommand kQuantize("quantize", "Re-encode a GGUF or Hugging Face folder into a GGUF (q4_k_m, q5_k_m, q6_k, q8_0, q4_0, f16 ...)", [](CLI::App& app) {
  auto o = std::make_shared<QuantizeCliOptions>();
  app.add_option("input", o->in, "GGUF file or Hugging Face folder")->required();
  app.add_option("output", o->out, "GGUF file to write")->required();
  app.add_option("--type", o->type, fmt::format("Type of the weight matrices: {}", kTypes))->capture_default_str();
  app.add_option("--keep-embeddings", o->keep_embeddings, "Type of token_embd.weight (default: --type)");
  app.add_option("--keep-output", o->keep_output, "Type of output.weight (default: --type)");
  app.add_flag("-q,--quiet", o->quiet, "No progress or summary");
  return [o] { return run_quantize(*o); };
});

}  // namespace
}  // namespace hz::cli
