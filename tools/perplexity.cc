// horizon perplexity: perplexity of a model over a text file in windows of --ctx (llama.cpp's
// method), with any KV configuration; saves a base run's distributions and reports the KL
// divergence of a run against it (mean, median, 99th percentile, top-token change rate).
#include <chrono>
#include <cmath>
#include <memory>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "runtime/perplexity.h"
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/engine_flags.h"
#include "tools/progress.h"

namespace hz::cli {
namespace {

struct PplOptions {
  EngineFlags engine;
  std::string text_file;
  std::string kl_base;
  bool kl = false;
};

int run_perplexity(const PplOptions& o) {
  auto opts = o.engine.resolve();
  if (!opts.ok()) return fail(opts.status().message());
  const EngineOptions& eo = *opts;
  if (eo.block_size < 16 || eo.block_size > 256 || eo.block_size % 16 != 0)
    return fail(fmt::format("--block-size {} must be a multiple of 16 between 16 and 256", eo.block_size));
  if (eo.prefill_chunk < 1) return fail("--prefill-chunk must be at least 1");
  if (o.kl && o.kl_base.empty()) return fail("--kl-divergence needs --kl-divergence-base FILE (a saved base run)");
  auto model = [&] {
    LibraryProgress progress(o.engine.quiet);
    return Model::load(eo.model_path, eo.model_overrides);
  }();
  if (!model.ok()) return fail(model.status().message());
  Model& m = **model;
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
  po.kv.hot = eo.kv_dtype;
  po.kv.hot_window = static_cast<uint64_t>(eo.kv_hot_window);
  po.kv.cold = eo.kv_cold_dtype;
  po.kv.rotated = kv_rotation_on(eo.kv_rotation, po.kv);
  po.prefill_chunk = eo.prefill_chunk;
  po.bos_id = (*tok)->bos_id();
  po.keep_logprobs = !o.kl_base.empty();
  ThreadPool pool(eo.threads);
  auto t0 = std::chrono::steady_clock::now();
  // The running value as llama-perplexity shows it: perplexity so far and its standard error.
  std::unique_ptr<ProgressBar> bar;
  po.on_window = [&](int64_t done, int64_t total, double nll, double nll2, int64_t n) {
    if (!bar) bar = std::make_unique<ProgressBar>("perplexity windows", total, ProgressBar::Unit::kCount, o.engine.quiet);
    bar->update(done, fmt::format("ppl {:.4f} ± {:.4f}", std::exp(nll / n), perplexity_error(nll, nll2, n)));
  };
  auto r = compute_perplexity(m, pool, tokens, po);
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
                         return [o] { return run_perplexity(*o); };
                       });

}  // namespace
}  // namespace hz::cli
