// horizon perplexity: perplexity of a model over a text file in windows of --ctx (llama.cpp's
// method), with any KV configuration; saves a base run's distributions and reports the KL
// divergence of a run against it (mean, median, 99th percentile, top-token change rate).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <memory>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "kernels/cuda/backend.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/device_flag.h"
#include "tools/engine_flags.h"
#include "tools/progress.h"

namespace hz::cli {
namespace {

struct PplOptions {
  EngineFlags engine;
  std::string text_file;
  std::string kl_base;
  bool kl = false;
  bool kv_sweep = false;
  std::string sweep_windows = "16,32,64";
  int32_t sweep_sinks = 4;
  bool sweep_all = false;
  std::string sweep_types;  // empty: every row
};

// One row of the --kv-sweep table.
struct SweepConfig {
  std::string name;
  KvPrecision p;
};

// The KV choices --kv-sweep measures: every type usable alone, with and without rotation; int4 /
// int4c / int8 cold under f16 hot windows of the given sizes; int3 / int2 cold (not rotated:
// measured worse rotated; int2 also with `sinks` sink tokens); keys and values in different types
// (which stream needs the third bit depends on the model: keys at head dim 8, values on a model
// with outlier keys at depth, so both orders are rows). `all` adds the
// rotated and the with/without-sinks variants of every int3 / int2 row.
std::vector<SweepConfig> sweep_configs(const std::vector<int32_t>& windows, int32_t sinks, bool all) {
  std::vector<SweepConfig> out;
  auto add = [&](KvType hot, int32_t window, KvType cold, bool rotated, int32_t sink_tokens = 0) {
    KvPrecision p{hot, static_cast<uint64_t>(window), window > 0 ? cold : hot, rotated,
                  window > 0 ? static_cast<uint64_t>(sink_tokens) : 0};
    out.push_back({kv_precision_name(p), p});
  };
  // Keys in `k`, values in `v` (cold types under a window of f16 when window > 0); V rotated when
  // its type is scaled per row group (as --kv-rotation auto does), K never.
  auto add_split = [&](int32_t window, KvType k, KvType v, int32_t sink_tokens = 0) {
    KvPrecision p;
    p.hot_window = static_cast<uint64_t>(window);
    if (window > 0) {
      p.cold = k;
      p.cold_v = v;
      p.sink_tokens = static_cast<uint64_t>(sink_tokens);
    } else {
      p.hot = p.cold = k;
      p.hot_v = p.cold_v = v;
    }
    p.rotated_v = v == KvType::kInt8 || v == KvType::kInt4;
    p = kv_canonical(p);
    out.push_back({kv_precision_name(p), p});
  };
  add(KvType::kF16, 0, KvType::kF16, false);
  for (KvType t : {KvType::kFp8, KvType::kInt8, KvType::kInt8c, KvType::kInt4, KvType::kInt4c}) {
    add(t, 0, t, false);
    add(t, 0, t, true);
  }
  add_split(0, KvType::kInt8c, KvType::kInt4c);
  add_split(0, KvType::kInt4c, KvType::kInt4);
  for (int32_t w : windows) {
    add(KvType::kF16, w, KvType::kInt4, false);
    add(KvType::kF16, w, KvType::kInt4, true);
    add(KvType::kF16, w, KvType::kInt4c, false);
    add(KvType::kF16, w, KvType::kInt8, true);
    for (KvType t : {KvType::kInt3, KvType::kInt2}) {
      for (bool rotated : {false, true}) {
        for (int32_t s : {0, sinks}) {
          const bool default_row = !rotated && (s == 0 || t == KvType::kInt2);
          if ((all || default_row) && (s == 0 || sinks > 0)) add(KvType::kF16, w, t, rotated, s);
          if (sinks == 0) break;
        }
      }
    }
    add_split(w, KvType::kInt3, KvType::kInt2, sinks);
    add_split(w, KvType::kInt2, KvType::kInt3, sinks);
    add_split(w, KvType::kInt4c, KvType::kInt2, sinks);
    if (all && sinks > 0) add_split(w, KvType::kInt3, KvType::kInt2);
  }
  return out;
}

Result<std::vector<int32_t>> parse_windows(const std::string& text) {
  std::vector<int32_t> out;
  size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || end == nullptr || *end != '\0' || v < 1 || v > (1 << 24))
      return invalid_argument("--kv-sweep-windows '{}': '{}' is not a window size in tokens (e.g. 16,32,64)", text, item);
    out.push_back(static_cast<int32_t>(v));
    at = comma + 1;
  }
  return out;
}

// --kv-sweep-types: keeps the rows whose stored type (the cold type under a window, else the only
// one) is listed; names as --kv-cache-dtype takes them.
Result<std::vector<SweepConfig>> filter_types(std::vector<SweepConfig> rows, const std::string& text) {
  if (text.empty()) return rows;
  std::vector<KvType> keep;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    HZ_ASSIGN_OR_RETURN(KvType t, parse_kv_type(text.substr(at, comma - at), "--kv-sweep-types"));
    keep.push_back(t);
    at = comma + 1;
  }
  std::erase_if(rows, [&](const SweepConfig& r) {
    const KvTypePair stored = r.p.arena_types();
    auto listed = [&](KvType t) { return std::find(keep.begin(), keep.end(), t) != keep.end(); };
    return !listed(stored.k) && !listed(stored.v);
  });
  if (rows.empty())
    return invalid_argument("--kv-sweep-types '{}': no row of the sweep stores these types (its rows store f16, fp8, "
                            "int8, int8c, int4, int4c, and int3 / int2 under the --kv-sweep-windows)",
                            text);
  return rows;
}

// --kv-sweep: an exact (f32 KV) base run, then every configuration of sweep_configs against it, as
// one table a user can pick from: size (bits per value with scales, bytes per token) against loss
// (KL divergence, top-1 agreement, perplexity change).
int run_kv_sweep(const PplOptions& o, Model& m, ThreadPool& pool, const std::vector<int32_t>& tokens, PerplexityOptions po) {
  auto windows = parse_windows(o.sweep_windows);
  if (!windows.ok()) return fail(windows.status().message());
  if (o.sweep_sinks < 0) return fail("--kv-sweep-sinks must be 0 or more");
  auto filtered = filter_types(sweep_configs(*windows, o.sweep_sinks, o.sweep_all), o.sweep_types);
  if (!filtered.ok()) return fail(filtered.status().message());
  const std::vector<SweepConfig> configs = std::move(filtered).value();
  const ModelConfig& c = m.config();
  KvGeometry g;
  g.num_layers = static_cast<uint64_t>(c.num_layers);
  g.num_heads = static_cast<uint64_t>(c.num_kv_heads);
  g.head_dim = static_cast<uint64_t>(c.head_dim);
  const double values_per_token = 2.0 * static_cast<double>(g.num_layers * g.num_heads * g.head_dim);
  po.keep_logprobs = true;
  ProgressBar bar("kv sweep", configs.size() + 1, ProgressBar::Unit::kCount, o.engine.quiet);
  auto run = [&](const KvPrecision& p, size_t idx, const std::string& name) -> Result<PerplexityResult> {
    po.kv = p;
    po.on_window = [&](int64_t done, int64_t total, double, double, int64_t) {
      bar.update(idx, fmt::format("{}: window {}/{}", name, done, total));
    };
    return compute_perplexity(m, pool, tokens, po);
  };
  auto base = run(KvPrecision{KvType::kF32, 0, KvType::kF32}, 0, "f32 base");
  if (!base.ok()) return fail(base.status().message());
  struct Row {
    const SweepConfig* cfg;
    PerplexityResult r;
    KlStats k;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < configs.size(); ++i) {
    auto r = run(configs[i].p, i + 1, configs[i].name);
    if (!r.ok()) return fail(r.status().message());
    KlStats k = kl_divergence(base->logprobs, r->logprobs, r->vocab);
    r->logprobs.clear();
    r->logprobs.shrink_to_fit();
    rows.push_back({&configs[i], std::move(*r), k});
  }
  bar.finish();
  // How confident the model is (a random-weight model is near uniform unless its head is scaled).
  double top1 = 0;
  const size_t vocab = static_cast<size_t>(base->vocab);
  const size_t scored = vocab > 0 ? base->logprobs.size() / vocab : 0;
  for (size_t i = 0; i < scored; ++i) {
    const float* row = base->logprobs.data() + i * vocab;
    top1 += std::exp(static_cast<double>(*std::max_element(row, row + vocab)));
  }
  std::printf("model %s | ctx %d | block %d | %d windows, %lld scored tokens | base: f32 KV, ppl %.4f, mean top-1 p %.3f\n",
              c.name.c_str(), po.ctx, po.block_tokens, base->num_windows, static_cast<long long>(base->num_scored),
              base->ppl, scored > 0 ? top1 / static_cast<double>(scored) : 0.0);
  std::printf("%-44s %9s %10s %10s %11s %11s %8s %9s %8s\n", "KV", "bits/val", "cold B/tok", "B/tok@ctx", "mean KLD",
              "p99 KLD", "top-1 %", "ppl", "dppl %");
  for (const Row& row : rows) {
    const KvPrecision& p = row.cfg->p;
    const double cold_bpt = static_cast<double>(kv_block_bytes(g, p.arena_types(), static_cast<uint64_t>(po.block_tokens))) /
                            po.block_tokens;
    const double ctx_bpt = static_cast<double>(kv_bytes_for_tokens(g, p, static_cast<uint64_t>(po.block_tokens),
                                                                   static_cast<uint64_t>(po.ctx))) / po.ctx;
    std::printf("%-44s %9.2f %10.1f %10.1f %11.3e %11.3e %8.2f %9.4f %+8.2f\n", row.cfg->name.c_str(),
                cold_bpt * 8 / values_per_token, cold_bpt, ctx_bpt, row.k.mean, row.k.p99,
                100.0 * (1.0 - row.k.top_token_change_rate), row.r.ppl, 100.0 * (row.r.ppl / base->ppl - 1.0));
  }
  std::printf("bits/val: bits per stored K/V value of the cold (or only) types (the mean of K's and V's), scales "
              "included; B/tok@ctx: bytes per token of a --ctx sequence in whole blocks, hot part included\n");
  return 0;
}

int run_perplexity(const PplOptions& o) {
  auto opts = o.engine.resolve();
  if (!opts.ok()) return fail(opts.status().message());
  const EngineOptions& eo = *opts;
  const bool on_device = eo.device != EngineDevice::kCpu;
  if (on_device && o.kv_sweep) return fail("--kv-sweep runs on the CPU (drop --device cuda)");
  if (eo.block_size < 16 || eo.block_size > 256 || eo.block_size % 16 != 0)
    return fail(fmt::format("--block-size {} must be a multiple of 16 between 16 and 256", eo.block_size));
  if (eo.prefill_chunk < 1) return fail("--prefill-chunk must be at least 1");
  if (o.kv_sweep && (o.kl || !o.kl_base.empty()))
    return fail("--kv-sweep makes its own exact base run: drop --kl-divergence-base / --kl-divergence");
  if (o.kl && o.kl_base.empty()) return fail("--kl-divergence needs --kl-divergence-base FILE (a saved base run)");
  auto model = [&] {
    LibraryProgress progress(o.engine.quiet);
    return Model::load(eo.model_path, eo.model_overrides, /*pack=*/!on_device);  // the device model reads it unpacked
  }();
  if (!model.ok()) return fail(model.status().message());
  Model& m = **model;
  if (eo.check_finite && on_device) return fail("--check-finite checks the CPU forward pass; drop --device cuda");
  m.set_check_finite(eo.check_finite);
  auto tok = Tokenizer::from_gguf(m.file());
  if (!tok.ok()) return fail(tok.status().message());

  std::optional<KlBase> base;
  std::vector<int32_t> tokens;
  if (o.kl) {
    auto b = load_kl_base(o.kl_base);
    if (!b.ok()) return fail(b.status().message());
    base = std::move(*b);
    if (base->vocab != m.config().vocab)
      return fail(fmt::format("--kl-divergence-base {}: vocab {} but the model has {}", o.kl_base, base->vocab,
                              m.config().vocab));
    tokens = base->tokens;
  } else {
    if (o.text_file.empty()) return fail("give the text with -f FILE");
    std::ifstream in(o.text_file, std::ios::binary);
    if (!in) return fail(o.text_file + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    tokens = (*tok)->encode(ss.str(), /*add_special=*/true, /*parse_special=*/false);
  }
  PerplexityOptions po;
  po.ctx = base ? base->ctx : (eo.max_model_len > 0 ? eo.max_model_len : m.config().train_ctx);
  if (base && eo.max_model_len > 0 && eo.max_model_len != base->ctx)
    return fail(fmt::format("--ctx {} differs from the base run's {}", eo.max_model_len, base->ctx));
  po.block_tokens = eo.block_size;
  po.kv = kv_precision(eo);
  po.prefill_chunk = eo.prefill_chunk;
  po.bos_id = (*tok)->bos_id();
  po.keep_logprobs = !o.kl_base.empty();
  ThreadPool pool(eo.threads);
  if (o.kv_sweep) return run_kv_sweep(o, m, pool, tokens, po);
  auto t0 = std::chrono::steady_clock::now();
  // The running value as llama-perplexity shows it: perplexity so far and its standard error.
  std::unique_ptr<ProgressBar> bar;
  po.on_window = [&](int64_t done, int64_t total, double nll, double nll2, int64_t n) {
    if (!bar) bar = std::make_unique<ProgressBar>("perplexity windows", total, ProgressBar::Unit::kCount, o.engine.quiet);
    bar->update(done, fmt::format("ppl {:.4f} ± {:.4f}", std::exp(nll / n), perplexity_error(nll, nll2, n)));
  };
  Result<PerplexityResult> r = invalid_argument("unreachable");
  if (on_device) {
    // po.kv as above; compute_perplexity_on_device refuses what the device KV cache lacks.
    auto backend = make_device_backend(eo.device);
    if (!backend.ok()) return fail(backend.status().message());
    r = compute_perplexity_on_device(m, **backend, tokens, po);
  } else {
    r = compute_perplexity(m, pool, tokens, po);
  }
  if (bar) bar->finish();
  if (!r.ok()) return fail(r.status().message());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("model %s | KV %s | ctx %d | %d windows, %lld scored tokens | %.1f s\n", m.config().name.c_str(),
              kv_precision_name(po.kv).c_str(), po.ctx, r->num_windows, static_cast<long long>(r->num_scored), secs);
  std::printf("perplexity: %.4f ± %.4f\n", r->ppl, r->ppl_error);
  if (!o.kl_base.empty() && !o.kl) {
    KlBase b{po.ctx, r->vocab, tokens, std::move(r->logprobs)};
    Status s = save_kl_base(o.kl_base, b);
    if (!s.ok()) return fail(s.message());
    std::printf("saved the base distributions to %s\n", o.kl_base.c_str());
  } else if (o.kl) {
    if (base->logprobs.size() != r->logprobs.size())
      return fail(fmt::format("--kl-divergence-base {}: {} scored values, this run has {}", o.kl_base,
                              base->logprobs.size(), r->logprobs.size()));
    KlStats k = kl_divergence(base->logprobs, r->logprobs, r->vocab);
    std::printf("KL divergence vs base: mean %.6f | median %.6f | p99 %.6f | max %.6f | top token changed %.3f%%\n",
                k.mean, k.median, k.p99, k.max, 100.0 * k.top_token_change_rate);
  }
  return 0;
}

Subcommand kPerplexity("perplexity", "Perplexity and KL divergence of a model (and KV configuration) over a text",
                       [](CLI::App& app) {
                         auto o = std::make_shared<PplOptions>();
                         add_config_flag(app);
                         o->engine.add_to(app, /*server=*/false);
                         app.add_option("-f,--file", o->text_file, "Text file to score");
                         app.add_option("--kl-divergence-base", o->kl_base,
                                        "Base distributions: written by a plain run, read with --kl-divergence");
                         app.add_flag("--kl-divergence", o->kl, "Compare this run's distributions with the base");
                         app.add_flag("--kv-sweep", o->kv_sweep,
                                      "Measure every KV choice (types, rotation, hot windows, sink tokens) against exact KV and print "
                                      "one table: bits per value, bytes per token, mean and p99 KL divergence, top-1 "
                                      "agreement, perplexity change");
                         app.add_option("--kv-sweep-windows", o->sweep_windows,
                                        "Hot-window sizes the sweep tries, comma-separated (default 16,32,64)");
                         app.add_option("--kv-sweep-sinks", o->sweep_sinks,
                                        "Sink tokens of the sweep's rows with sinks (default 4; 0: no such rows)");
                         app.add_flag("--kv-sweep-all", o->sweep_all,
                                      "Also measure int3 / int2 rotated, and with and without sink tokens");
                         app.add_option("--kv-sweep-types", o->sweep_types,
                                        "Only the sweep's rows that store these types, comma-separated (e.g. "
                                        "int8c,int4c; at depth every row is a long run)");
                         return [o] { return run_perplexity(*o); };
                       });

}  // namespace
}  // namespace hz::cli
