// `horizon bench engine|serve`: speed measurements with their conditions attached. This file maps
// flags onto src/bench and prints the reports (aligned table, --json, --svg).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "bench/engine_bench.h"
#include "bench/peer_bench.h"
#include "bench/serve_bench.h"
#include "bench/spec_bench.h"
#include "bench/svg_plot.h"
#include "tools/cli.h"
#include "tools/engine_flags.h"
#include "tools/progress.h"

namespace hz::cli {
namespace {

using nlohmann::json;

struct EngineBenchFlags {
  EngineFlags engine;
  std::vector<int64_t> prompts = {512};
  int32_t n_gen = 128;
  std::vector<int64_t> depths = {0};
  int32_t reps = 3;
  int32_t batch = 1;
  std::string fill = "synthetic";
  bool no_warmup = false;
  bool far_cold = false;
  bool check_attention = false;
  bool json = false;
  std::string svg;
  // --peer: compare with llama.cpp instead (prefill and decode side by side); the rest of the peer flags below.
  std::string peer;
};

// `bench peer` flags, also accepted by `bench engine` together with --peer.
struct PeerFlags {
  bench::PeerBenchOptions o;
  bool no_cache = false;
  bool json = false;
  void add_to(CLI::App& app, bool with_model) {
    if (with_model) {
      app.add_option("--peer", o.peer_path, "Path of llama.cpp's llama-bench executable")->required();
      app.add_option("-m,--model", o.model_path, "GGUF model file both engines run")->required();
      app.add_option("-t,--threads", o.threads, "Threads for both engines (0 = all hardware threads)")->capture_default_str();
      app.add_option("-r,--reps", o.reps, "Repetitions per test (median reported)")->capture_default_str();
      app.add_flag("--json", json, "Print the report as JSON");
    }
    app.add_flag("--long", o.long_rows, "Also the long rows: decode at --long-depth and a --long-prompt prefill (slow)");
    app.add_option("--pp", o.prompt_tokens, "Prefill test length")->capture_default_str();
    app.add_option("--tg", o.gen_tokens, "Tokens decoded per decode test")->capture_default_str();
    app.add_option("--peer-depth", o.depth, "Depth of the f16 / 8-bit KV decode rows (0: no such rows)")->capture_default_str();
    app.add_option("--peer-batched-bench", o.batched_bench_path,
                   "llama.cpp's llama-batched-bench, for the depth rows when llama-bench has no -d (older builds); "
                   "default: the one beside --peer");
    app.add_option("--rounds", o.rounds,
                   "Paired: N rounds, each running every test once per engine back to back (no cache); ratios are "
                   "medians of the per-round ratios, with their spread and a bandwidth probe per round")
        ->capture_default_str();
    app.add_option("--long-depth", o.long_depth, "Depth of the long decode rows (with --long)")->capture_default_str();
    app.add_option("--long-prompt", o.long_prompt, "Prompt length of the long prefill row (with --long)")->capture_default_str();
    app.add_option("--peer-cache-dir", o.cache_dir, "Where llama-bench results are cached (default $XDG_CACHE_HOME/horizon/peer)");
    app.add_flag("--no-peer-cache", no_cache, "Rerun llama-bench even when a cached result exists (and refresh it)");
    app.add_option("--peer-cache-max-load", o.cache_max_load,
                   "Cache a llama-bench result only if the load average stayed at most this (default 1.5 x cpus; 0 = always)");
    app.add_option("--horizon-binary", o.horizon_path, "horizon executable to run (default: this one)");
  }
};

struct ServeBenchFlags {
  bench::ServeBenchOptions o;
  bool json = false;
  bool quiet = false;
  std::string svg;
};

// A status on stderr: rewritten in place on a terminal, one line per status otherwise (each status
// names one test of the run, seconds apart); nothing when quiet.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(ProgressBar::stderr_is_tty()) {}
  ~Progress() { clear(); }
  void show(const std::string& s) {
    if (quiet_ || s == last_) return;
    last_ = s;
    if (!tty_) {
      std::fprintf(stderr, "%s\n", s.c_str());
      return;
    }
    std::fprintf(stderr, "\r\033[K%s", s.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) std::fputs("\r\033[K", stderr);
    shown_ = false;
  }

 private:
  bool quiet_, tty_;
  bool shown_ = false;
  std::string last_;
};

std::string gib(uint64_t b) { return format_bytes(b); }

std::string conditions_lines(const json& c) {
  std::string s = fmt::format("cpu: {} ({}), {} cpus, RAM {}\n", c.value("cpu_model", "?"), c.value("cpu_features", "?"),
                              c.value("num_cpus", 0), gib(c.value("ram_bytes", uint64_t{0})));
  s += fmt::format("horizon {} ({}), {}\n", c.value("horizon_version", "?"), c.value("git_hash", "?"),
                   c.value("timestamp", "?"));
  return s;
}

int write_svg(const std::string& path, const std::string& title, const std::vector<bench::PlotSpec>& panels) {
  std::ofstream out(path);
  if (!out) return fail("--svg: cannot write '" + path + "'");
  out << bench::render_svg(title, panels);
  if (!out) return fail("--svg: writing '" + path + "' failed");
  return 0;
}

int run_bench_engine(const EngineBenchFlags& f) {
  auto eo = f.engine.resolve();
  if (!eo.ok()) return fail(eo.status().message());
  bench::EngineBenchOptions o;
  o.model_path = eo->model_path;
  o.device = eo->device;
  o.threads = eo->threads;
  EngineOptions kv_eo = *eo;
  o.kv = kv_precision(kv_eo);
  o.block_size = eo->block_size;
  o.prefill_chunk = eo->prefill_chunk;
  o.prompt_lengths = f.prompts;
  o.gen_tokens = f.n_gen;
  o.depths = f.depths.empty() ? std::vector<int64_t>{0} : f.depths;
  o.reps = f.reps;
  o.batch = f.batch;
  o.warmup = !f.no_warmup;
  o.far_cold = f.far_cold;
  o.check_attention = f.check_attention;
  if (o.check_attention && (o.device == EngineDevice::kCpu || f.fill != "synthetic"))
    return fail("--check-attention checks the device's attention over a synthetic fill: it needs --device cuda and "
                "--fill synthetic");
  o.kv_budget_bytes = eo->kv_budget_bytes;
  o.kv_disk_dir = eo->kv_disk_dir;
  o.kv_disk_budget_bytes = eo->kv_disk_budget_bytes;
  if (f.fill == "synthetic") {
    o.fill = bench::FillMode::kSynthetic;
  } else if (f.fill == "prefill") {
    o.fill = bench::FillMode::kPrefill;
  } else {
    return fail("--fill '" + f.fill + "' is not one of synthetic, prefill");
  }
  if (o.prompt_lengths.size() == 1 && o.prompt_lengths[0] == 0) o.prompt_lengths.clear();  // -p 0: no pp test
  Progress progress(f.engine.quiet || f.json);  // --json: stderr stays clean for scripts
  LibraryProgress load_progress(f.engine.quiet);
  auto rep = bench::run_engine_bench(o, [&](const std::string& s) { progress.show(s); });
  progress.clear();
  if (!rep.ok()) return fail(rep.status().message());
  const json& c = rep->conditions;
  const double bytes_per_token = c.value("decode_weight_bytes_per_token", 0.0);

  if (!f.svg.empty()) {
    // Prefill and decode speeds differ by an order of magnitude: one panel each, so both read.
    const std::string subtitle = fmt::format("weights {}, KV {}, {} threads, fill {}, {} reps (median); {}",
                                             c.value("weight_type", "?"), c.value("kv_cache_dtype", "?"),
                                             c.value("threads", 0), c.value("fill", "?"), c.value("reps", 0),
                                             c.value("cpu_model", "?"));
    bench::PlotSpec pp{"prefill", subtitle, "prompt tokens", "tokens/s", {{"prefill", {}}}};
    bench::PlotSpec tg{"decode", subtitle, "context depth (tokens already in the KV cache)", "tokens/s", {{"decode", {}}}};
    for (const auto& r : rep->results) {
      (r.prefill ? pp : tg).series[0].points.emplace_back(static_cast<double>(r.prefill ? r.prompt_tokens : r.depth),
                                                          r.summary.median);
    }
    std::vector<bench::PlotSpec> panels;
    if (!pp.series[0].points.empty()) panels.push_back(pp);
    if (!tg.series[0].points.empty()) panels.push_back(tg);
    const std::string file = std::filesystem::path(c.value("model_path", "?")).filename().string();
    if (int rc = write_svg(f.svg, fmt::format("horizon bench engine: {} ({})", file, c.value("model_name", "?")), panels);
        rc != 0)
      return rc;
  }

  if (f.json) {
    std::puts(rep->to_json().dump(2).c_str());
    for (const auto& r : rep->results) {
      if (r.attention_check_failed) return fail(fmt::format("{}: the device's attention differs from the host reference", r.test));
    }
    return 0;
  }
  std::string out = fmt::format("model: {} ({}, {}, weights {}; decode reads {} of weights per token)\n",
                                c.value("model_path", "?"), c.value("model_name", "?"), c.value("arch", "?"),
                                c.value("weight_type", "?"), gib(static_cast<uint64_t>(bytes_per_token)));
  if (c.contains("device")) {
    out += fmt::format("device: {} (weights {} on the device{})\n", c.value("device", "?"),
                       gib(c.value("device_weight_bytes", uint64_t{0})),
                       c["device_conversions"].empty() ? "" : fmt::format(", {} tensors converted to q8_0", c["device_conversions"].size()));
  }
  out += fmt::format("run: {} threads, KV {} ({} per token), block {}, prefill chunk {}, fill {}, {} reps\n",
                     c.value("threads", 0), c.value("kv_cache_dtype", "?"), gib(c.value("kv_bytes_per_token", uint64_t{0})),
                     c.value("block_size", 0), c.value("prefill_chunk", 0), c.value("fill", "?"), c.value("reps", 0));
  out += conditions_lines(c);
  out += fmt::format("\n{:<16} {:>8} {:>12} {:>12} {:>12} {:>14}\n", "test", "depth", "t/s median", "min", "max",
                     "weights GB/s");
  for (const auto& r : rep->results) {
    // A step of several sequences reads the weights once for all of them.
    std::string bw = r.prefill ? "" : fmt::format("{:.1f}", r.summary.median / r.batch * bytes_per_token / 1e9);
    out += fmt::format("{:<16} {:>8} {:>12.2f} {:>12.2f} {:>12.2f} {:>14}\n", r.test, r.depth, r.summary.median,
                       r.summary.min, r.summary.max, bw);
  }
  bool any_fill = false;
  for (const auto& r : rep->results) {
    if (!r.prefill && r.depth > 0) {
      if (!any_fill) out += "\n";
      any_fill = true;
      const std::string how = r.batch > 1 ? "prefill" : c.value("fill", "?");
      out += fmt::format("{}: depth reached by {} fill in {:.2f} s\n", r.test, how, r.fill_seconds);
      if (!r.attention_check.empty()) out += fmt::format("{}: attention check at depth {}, {}\n", r.test, r.depth, r.attention_check);
    }
  }
  // Speed is measured at any depth; past the training context the model's output means nothing.
  const int64_t train_ctx = c.value("train_ctx", int64_t{0});
  int64_t deepest = 0;
  for (const auto& r : rep->results) deepest = std::max<int64_t>(deepest, r.depth);
  if (train_ctx > 0 && deepest > train_ctx) {
    out += fmt::format("\nnote: depth {} is past the model's training context ({} tokens): the figures measure speed; "
                       "what the model would write there is not meaningful\n",
                       deepest, train_ctx);
  }
  std::fputs(out.c_str(), stdout);
  for (const auto& r : rep->results) {
    if (r.attention_check_failed) return fail(fmt::format("{}: the device's attention differs from the host reference", r.test));
  }
  return 0;
}

int run_bench_peer(const PeerFlags& f) {
  bench::PeerBenchOptions o = f.o;
  o.use_cache = !f.no_cache;
  // Progress goes to stderr line by line (runs take minutes; a log is more useful than a spinner).
  auto rep = bench::run_peer_bench(o, [&](const std::string& s) {
    if (!f.json) std::fprintf(stderr, "%s\n", s.c_str());
  });
  if (!rep.ok()) return fail(rep.status().message());
  if (f.json) {
    std::puts(rep->to_json().dump(2).c_str());
  } else {
    std::fputs(rep->to_text().c_str(), stdout);
  }
  return 0;
}

int run_bench_serve(const ServeBenchFlags& f) {
  // Requests done of --requests, or seconds of --duration.
  const bool by_requests = f.o.requests > 0;
  ProgressBar bar("bench serve", by_requests ? static_cast<uint64_t>(f.o.requests) : static_cast<uint64_t>(f.o.duration_s),
                  ProgressBar::Unit::kCount, f.quiet || f.json);
  const auto start = std::chrono::steady_clock::now();
  bench::ServeBenchOptions o = f.o;
  o.timeline = !f.svg.empty();
  auto rep = bench::run_serve_bench(o, [&](int64_t done, int64_t refused, int64_t errs) {
    const uint64_t secs = static_cast<uint64_t>(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    bar.update(by_requests ? static_cast<uint64_t>(done + refused + errs) : secs,
               fmt::format("{} completed, {} refused (429), {} errors", done, refused, errs));
  });
  bar.finish();
  if (!rep.ok()) return fail(rep.status().message());
  json& r = *rep;
  if (!f.svg.empty()) {
    const std::string title = fmt::format("horizon bench serve: {} at {}", r["conditions"].value("model", "?"),
                                          r["conditions"].value("url", "?"));
    if (int rc = write_svg(f.svg, title, bench::serve_plots(r)); rc != 0) return rc;
    r.erase("timeline");  // the plot shows it; the report stays one line per figure
  }
  // A run in which nothing completed measured nothing: say so in the exit status too.
  const bool none_completed = r.value("requests", 0) > 0 && r.value("completed", 0) == 0;
  if (f.json) {
    std::puts(r.dump(2).c_str());
    return none_completed ? 1 : 0;
  }
  const json& c = r["conditions"];
  std::string out = fmt::format("server: {} model {} ({})\n", c.value("url", "?"), c.value("model", "?"),
                                c.value("endpoint", "?"));
  const std::string arrivals = c.value("request_rate", 0.0) > 0
                                   ? fmt::format("{:g} requests/s (Poisson arrivals), at most {} at once",
                                                 c.value("request_rate", 0.0), c.value("concurrency", 0))
                                   : fmt::format("concurrency {}", c.value("concurrency", 0));
  out += fmt::format("load: {}, input ~{} tokens ({}; mean {:.1f} by the server), output {} tokens\n", arrivals,
                     c.value("input_tokens_target", 0), c.value("prompt_source", "?"), r.value("mean_prompt_tokens", 0.0),
                     c.value("output_tokens", 0));
  out += conditions_lines(c);
  out += fmt::format("\nrequests {} (completed {}, refused with 429 {}, errors {}, error rate {:.1f}%) in {:.2f} s\n",
                     r.value("requests", 0), r.value("completed", 0), r.value("rejected", 0), r.value("errors", 0),
                     100 * r.value("error_rate", 0.0), r.value("duration_s", 0.0));
  out += fmt::format("throughput: {:.2f} requests/s, {:.1f} output tokens/s\n", r.value("request_throughput_per_s", 0.0),
                     r.value("output_tokens_per_s", 0.0));
  if (r.contains("server_peak_rss_bytes")) {
    out += fmt::format("server peak RSS: {}\n", gib(r.value("server_peak_rss_bytes", uint64_t{0})));
  }
  out += fmt::format("\n{:<16} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "latency (ms)", "mean", "p50", "p95", "p99", "max");
  for (const char* k : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms"}) {
    const json& l = r[k];
    out += fmt::format("{:<16} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f}\n", k, l.value("mean", 0.0),
                       l.value("p50", 0.0), l.value("p95", 0.0), l.value("p99", 0.0), l.value("max", 0.0));
  }
  for (const auto& e : r["error_samples"]) out += "error: " + e.get<std::string>() + "\n";
  std::fputs(out.c_str(), stdout);
  if (none_completed) return fail("no request completed");
  return 0;
}

struct SpecBenchFlags {
  EngineFlags engine;
  bench::SpecBenchOptions o;
  std::string prompt_file;
};

int run_bench_spec(const SpecBenchFlags& f) {
  auto eo = f.engine.resolve();
  if (!eo.ok()) return fail(eo.status().message());
  bench::SpecBenchOptions o = f.o;
  o.engine = *eo;
  if (!f.prompt_file.empty()) {
    if (!o.prompt.empty()) return fail("give the prompt with -p or -f, not both");
    std::ifstream in(f.prompt_file, std::ios::binary);
    if (!in) return fail(f.prompt_file + ": cannot read the prompt file");
    o.prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto rep = bench::run_spec_bench(o, [&](const std::string& line) {
    if (!f.engine.quiet) std::fprintf(stderr, "%s\n", line.c_str());
  });
  if (!rep.ok()) return fail(rep.status().message());
  std::fputs(rep->to_text().c_str(), stdout);
  return rep->identical ? 0 : 1;
}

Subcommand kBench("bench", "Measure speed: the engine in-process, or a running server", [](CLI::App& app) {
  app.require_subcommand(1);
  auto ef = std::make_shared<EngineBenchFlags>();
  auto sf = std::make_shared<ServeBenchFlags>();
  auto pf = std::make_shared<PeerFlags>();
  auto which = std::make_shared<int>(0);

  CLI::App* eng = app.add_subcommand("engine", "Prefill (pp) and decode (tg, at depths) tokens/s of one sequence");
  ef->engine.add_to(*eng, /*server=*/false);
  eng->add_option("-p,--n-prompt", ef->prompts, "Prompt lengths for prefill tests, comma-separated (0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  eng->add_option("-n,--n-gen", ef->n_gen, "Tokens to decode per decode test (0 = none)")->capture_default_str();
  eng->add_option("-d,--depth", ef->depths, "KV depths to decode at, comma-separated")->delimiter(',')->capture_default_str();
  eng->add_option("-r,--reps", ef->reps, "Repetitions per test")->capture_default_str();
  eng->add_option("--seqs", ef->batch,
                  "Sequences decoded together in the decode tests: one step carries a token of each (their depth is "
                  "reached by prefill); t/s counts all of them")
      ->capture_default_str();
  eng->add_option("--fill", ef->fill, "How to reach a depth: synthetic (KV entries written directly) or prefill")
      ->capture_default_str();
  eng->add_flag("--no-warmup", ef->no_warmup, "Skip the warm-up run before each test");
  eng->add_flag("--far-cold", ef->far_cold,
                "With --kv-disk-dir: drop the far blocks from the page cache before each decode repetition, so they "
                "are read from disk");
  eng->add_flag("--check-attention", ef->check_attention,
                "With --device cuda: after each synthetic fill, check the last layer's attention for one query over "
                "every key against a double-precision host reference (deep contexts: 64-bit offsets)");
  eng->add_flag("--json", ef->json, "Print the report as JSON");
  eng->add_option("--svg", ef->svg, "Write an SVG plot of tokens/s against context length");
  eng->add_option("--peer", ef->peer,
                  "Compare with llama.cpp: path of its llama-bench; runs the comparison table (see `bench peer --help`)");
  pf->add_to(*eng, /*with_model=*/false);
  eng->callback([which] { *which = 1; });

  CLI::App* srv = app.add_subcommand("serve", "Load-test an OpenAI-compatible server with streaming clients");
  bench::ServeBenchOptions& o = sf->o;
  srv->add_option("--url", o.url, "Server base URL")->capture_default_str();
  srv->add_option("--api-key", o.api_key, "Bearer token for the server");
  srv->add_option("--model", o.model, "Model name to request (default: the first of /v1/models)");
  srv->add_option("-c,--concurrency", o.concurrency, "Concurrent streaming clients (with --request-rate: the most at once)")
      ->capture_default_str();
  srv->add_option("--request-rate", o.request_rate,
                  "Requests per second, arriving as a Poisson process (0 = each client sends its next request at once)")
      ->capture_default_str();
  srv->add_option("--seed", o.seed, "Seed of the --request-rate arrival times")->capture_default_str();
  auto* req = srv->add_option("--requests", o.requests, "Requests to send in total");
  auto* dur = srv->add_option("--duration", o.duration_s, "Or: seconds to keep starting requests");
  req->excludes(dur);
  srv->add_option("--input-tokens", o.input_tokens, "Synthetic prompt length in words (about tokens)")->capture_default_str();
  srv->add_option("--output-tokens", o.output_tokens, "max_tokens per request (with ignore_eos)")->capture_default_str();
  srv->add_option("--prompt-file", o.prompt_file, "Prompts, one per line, used in turn (instead of synthetic)");
  srv->add_option("--pid", o.pid, "Local server process id: report its peak RSS");
  srv->add_option("--timeout", o.timeout_s, "Seconds a request may wait for data")->capture_default_str();
  srv->add_flag("--json", sf->json, "Print the report as JSON");
  srv->add_option("--svg", sf->svg, "Write an SVG plot: each request's latency against its start, and requests finished per second");
  srv->add_flag("--quiet", sf->quiet, "No progress output");
  srv->callback([which] { *which = 2; });

  CLI::App* peer = app.add_subcommand("peer", "Compare with llama.cpp's llama-bench on the same file and threads");
  pf->add_to(*peer, /*with_model=*/true);
  peer->callback([which] { *which = 3; });

  auto xf = std::make_shared<SpecBenchFlags>();
  CLI::App* sp = app.add_subcommand(
      "spec", "Speculative decoding against plain decoding: paired rounds of one greedy request, identical output checked");
  xf->engine.add_to(*sp, /*server=*/false);
  sp->add_option("--drafter", xf->o.drafter,
                 "ngram (prompt lookup, as --spec ngram), oracle (the true continuation with --fail-rate of its tokens "
                 "wrong: the cost of verification alone) or none (a control: both sides decode plainly, so the ratio shows "
                 "the measurement's own spread)")
      ->capture_default_str();
  sp->add_option("-p,--prompt", xf->o.prompt, "Prompt text (default: --prompt-tokens pseudo-random tokens)");
  sp->add_option("-f,--file", xf->prompt_file, "Read the prompt from a file");
  sp->add_option("--prompt-tokens", xf->o.prompt_tokens, "Length of the pseudo-random prompt")->capture_default_str();
  sp->add_option("-n,--n-gen", xf->o.gen_tokens, "Tokens to generate per run")->capture_default_str();
  sp->add_option("--fail-rate", xf->o.fail_rate, "oracle: share of drafted tokens made wrong")->capture_default_str();
  sp->add_option("--rounds", xf->o.rounds, "Paired rounds (plain and speculative back to back, order alternating)")
      ->capture_default_str();
  sp->add_option("--reps", xf->o.reps, "Runs per engine in a round, alternating (their times are summed)")->capture_default_str();
  sp->add_option("--seed", xf->o.seed, "Seed of the prompt and of the oracle's failures")->capture_default_str();
  sp->callback([which] { *which = 4; });

  return [ef, sf, pf, xf, which] {
    if (*which == 4) return run_bench_spec(*xf);
    if (*which == 3) return run_bench_peer(*pf);
    if (*which == 1 && !ef->peer.empty()) {
      PeerFlags f = *pf;
      f.o.peer_path = ef->peer;
      f.o.model_path = ef->engine.opts.model_path;
      f.o.threads = ef->engine.opts.threads;
      f.o.reps = ef->reps;
      f.json = ef->json;
      return run_bench_peer(f);
    }
    if (*which == 1) return run_bench_engine(*ef);
    ServeBenchFlags f = *sf;
    if (f.o.requests == 0 && f.o.duration_s == 0) f.o.requests = 100;
    return run_bench_serve(f);
  };
});

}  // namespace
}  // namespace hz::cli
