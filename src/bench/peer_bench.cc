#include "bench/peer_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "bench/child_process.h"
#include "bench/conditions.h"
#include "bench/llama_bench_json.h"
#include "bench/peer_cache.h"

namespace hz::bench {

using nlohmann::json;

double ComparisonRow::peer_best() const {
  double best = 0;
  for (double v : peer_values) {
    if (v <= 0) continue;
    if (best == 0 || (lower_is_better ? v < best : v > best)) best = v;
  }
  return best;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ComparisonRow::ratio() const {
  if (!round_ratios.empty()) return median_of(round_ratios);
  const double p = peer_best();
  return p > 0 && ours > 0 ? ours / p : 0;
}

bool ComparisonRow::meets_target() const {
  const double r = ratio();
  if (target <= 0 || r <= 0) return false;
  return lower_is_better ? r <= target : r >= target;
}

namespace {

std::string value_text(double v, const std::string& unit) {
  if (v <= 0) return "-";
  if (unit == "bytes") return format_bytes(static_cast<uint64_t>(v));
  return fmt::format("{:.2f}", v);
}

}  // namespace

std::string format_comparison_table(const std::vector<ComparisonRow>& rows) {
  bool paired = false;
  for (const auto& r : rows) paired |= !r.round_ratios.empty();
  std::string out = fmt::format("{:<34} {:<18} {:>17} {:<9} {:>10} {:>8} {:>10}{}\n", "test", "llama.cpp config",
                                "llama.cpp", "horizon", "horizon", "ratio", "target", paired ? "  spread (rounds)" : "");
  for (const auto& r : rows) {
    std::string peer;
    for (double v : r.peer_values) peer += (peer.empty() ? "" : " / ") + value_text(v, r.unit);
    if (peer.empty()) peer = "-";
    std::string target = "";
    if (r.target > 0) {
      target = fmt::format("{}{:.2f}{}", r.lower_is_better ? "<=" : ">=", r.target,
                           r.ratio() <= 0 ? " " : (r.meets_target() ? " ok" : " no"));
    }
    const std::string ratio = r.ratio() > 0 ? fmt::format("{:.2f}x", r.ratio()) : "-";
    std::string spread;
    if (!r.round_ratios.empty()) {
      const auto [lo, hi] = std::minmax_element(r.round_ratios.begin(), r.round_ratios.end());
      spread = fmt::format("  {:.2f}-{:.2f}x ({})", *lo, *hi, r.round_ratios.size());
    }
    out += fmt::format("{:<34} {:<18} {:>17} {:<9} {:>10} {:>8} {:>10}{}\n", r.test, r.peer_config, peer, r.ours_config,
                       value_text(r.ours, r.unit), ratio, target, spread);
  }
  if (paired) {
    out += "(paired rounds: tokens/s are medians over the rounds; ratio = median of the per-round ratios, each horizon / "
           "llama.cpp's best listed configuration in that round; spread = lowest-highest per-round ratio)\n";
  } else {
    out += "(tokens/s, median of the repetitions; ratio = horizon / llama.cpp's best listed configuration, "
           "for RSS lower is better)\n";
  }
  return out;
}

double probe_read_bandwidth(int32_t threads) {
  constexpr size_t kWords = (size_t{256} << 20) / sizeof(uint64_t);
  // Allocated per probe and freed before the engines run: a buffer kept alive would count in the
  // children's peak RSS (forked children share the parent's pages until they exec).
  std::vector<uint64_t> buf(kWords);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  const int32_t n = std::max(threads, 1);
  double best = 0;
  std::vector<uint64_t> sums(n);
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int32_t t = 0; t < n; ++t) {
      workers.emplace_back([&, t] {
        const size_t begin = kWords * t / n, end = kWords * (t + 1) / n;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        for (size_t i = begin; i + 4 <= end; i += 4) {
          a += buf[i];
          b += buf[i + 1];
          c += buf[i + 2];
          d += buf[i + 3];
        }
        sums[t] = a + b + c + d;
      });
    }
    for (auto& w : workers) w.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(kWords * sizeof(uint64_t)) / s / 1e9);
  }
  // The sums must be used, or the loop is optimized away.
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) sink = sink + v;
  (void)sink;
  return best;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = 0;
  in >> l;
  return in ? l : 0;
}

json PeerBenchReport::to_json() const {
  json rs = json::array();
  for (const auto& r : rows) {
    rs.push_back({{"test", r.test},
                  {"peer_config", r.peer_config},
                  {"peer_values", r.peer_values},
                  {"ours_config", r.ours_config},
                  {"ours", r.ours},
                  {"unit", r.unit},
                  {"ratio", r.ratio()},
                  {"target", r.target},
                  {"lower_is_better", r.lower_is_better},
                  {"meets_target", r.meets_target()},
                  {"round_ratios", r.round_ratios}});
  }
  json runs_j = json::array();
  for (const auto& r : runs) {
    runs_j.push_back({{"engine", r.engine},
                      {"label", r.label},
                      {"tool", r.tool},
                      {"args", r.args},
                      {"cached", r.cached},
                      {"wall_seconds", r.wall_seconds},
                      {"peak_rss_bytes", r.peak_rss_bytes},
                      {"max_load", r.max_load},
                      {"round", r.round_idx}});
  }
  json rounds_j = json::array();
  for (const auto& r : rounds) rounds_j.push_back({{"bandwidth_gb_s", r.bandwidth_gb_s}, {"max_load", r.max_load}});
  return {{"mode", rounds.empty() ? "peer" : "peer-paired"},
          {"conditions", conditions},
          {"rows", rs},
          {"runs", runs_j},
          {"rounds", rounds_j}};
}

std::string PeerBenchReport::to_text() const {
  const json& c = conditions;
  std::string out = fmt::format("model: {} ({})\n", c.value("model_path", "?"), c.value("model_digest", "?"));
  out += fmt::format("llama.cpp: {} (build {} {}; {})\n", c.value("peer_path", "?"), c.value("peer_build_number", int64_t{0}),
                     c.value("peer_build_commit", "?"), c.value("peer_digest", "?"));
  out += fmt::format("horizon {} ({}); {} threads each, {} repetitions, horizon depth fill: {}\n",
                     c.value("horizon_version", "?"), c.value("git_hash", "?"), c.value("threads", 0), c.value("reps", 0),
                     c.value("fill", "?"));
  out += fmt::format("cpu: {} ({}), {} cpus; {}\n", c.value("cpu_model", "?"), c.value("cpu_features", "?"),
                     c.value("num_cpus", 0), c.value("timestamp", "?"));
  if (const std::string tool = c.value("peer_depth_tool", "llama-bench"); tool.empty()) {
    out += "llama.cpp depth rows: none (this llama-bench has no -d and no llama-batched-bench was found beside it; "
           "--peer-batched-bench names one)\n";
  } else if (tool != "llama-bench") {
    out += fmt::format("llama.cpp depth rows: {} (this llama-bench has no -d; one sequence with the depth as its prompt, "
                       "then the decode)\n", tool);
  }
  out += "\n";
  double worst = 0;
  for (const auto& r : runs) worst = std::max(worst, r.max_load);
  const int cpus = c.value("num_cpus", 0);
  if (cpus > 0 && worst > 1.5 * cpus) {
    out += fmt::format("WARNING: load average up to {:.1f} on {} cpus during these runs: other processes competed for the "
                       "CPUs, so the figures are not representative (busy llama.cpp results are not cached).\n\n",
                       worst, cpus);
  }
  out += format_comparison_table(rows);
  if (!rounds.empty()) {
    out += "\nround  read bandwidth  load\n";
    for (size_t i = 0; i < rounds.size(); ++i) {
      out += fmt::format("{:>5}  {:>9.1f} GB/s  {:>4.1f}\n", i + 1, rounds[i].bandwidth_gb_s, rounds[i].max_load);
    }
  }
  out += fmt::format("\n{:<10} {:<36} {:>9} {:>11} {:>5}  {}\n", "engine", "run", "seconds", "peak RSS", "load", "arguments");
  double total = 0;
  for (const auto& r : runs) {
    total += r.cached ? 0 : r.wall_seconds;
    out += fmt::format("{:<10} {:<36} {:>9} {:>11} {:>5.1f}  {}\n", r.engine,
                       r.round_idx >= 0 ? fmt::format("r{} {}", r.round_idx + 1, r.label) : r.label,
                       r.cached ? fmt::format("{:.0f}*", r.wall_seconds) : fmt::format("{:.0f}", r.wall_seconds),
                       r.peak_rss_bytes > 0 ? format_bytes(r.peak_rss_bytes) : "-", r.max_load, shell_join(r.args));
  }
  out += fmt::format("(* cached llama.cpp result: seconds and load of the original run; this run took {:.0f} s; load: "
                     "1-minute load average, the higher of before and after the run)\n", total);
  return out;
}

namespace {

struct Plan {
  EngineRun run;
  std::string key;  // which rows read it
};

// How the peer reaches a depth: llama-bench's -d, or llama-batched-bench (which prefills the depth
// and times the generation after it), or not at all.
enum class PeerDepth { kLlamaBench, kBatchedBench, kNone };

std::vector<std::string> peer_args(const PeerBenchOptions& o, int32_t threads, int64_t pp, int64_t tg, int64_t depth,
                                   const std::string& fa, bool q8, PeerDepth how) {
  std::vector<std::string> a = {"-t", std::to_string(threads), "-r", std::to_string(o.reps), "-p", std::to_string(pp),
                                "-n", std::to_string(tg)};
  // A llama-bench without -d rejects the flag, even as -d 0.
  if (how == PeerDepth::kLlamaBench) a.insert(a.end(), {"-d", std::to_string(depth)});
  a.insert(a.end(), {"-fa", fa});
  if (q8) a.insert(a.end(), {"-ctk", "q8_0", "-ctv", "q8_0"});
  return a;
}

// llama-batched-bench: one sequence, `depth` prompt tokens, then `tg` generated ones (its S_TG is
// the decode rate at that depth); flash attention is a plain flag there.
std::vector<std::string> batched_args(int32_t threads, int64_t tg, int64_t depth, bool fa, bool q8) {
  std::vector<std::string> a = {"-t",   std::to_string(threads), "-c",   std::to_string(depth + tg),
                                "-npp", std::to_string(depth),   "-ntg", std::to_string(tg),
                                "-npl", "1",                     "--output-format", "jsonl"};
  if (fa) a.push_back("-fa");
  if (q8) a.insert(a.end(), {"-ctk", "q8_0", "-ctv", "q8_0"});
  return a;
}

std::vector<std::string> ours_args(const PeerBenchOptions& o, int32_t threads, int64_t pp, int64_t tg, int64_t depth,
                                   const std::string& kv) {
  return {"bench", "engine", "-m", o.model_path, "-t", std::to_string(threads), "--reps", std::to_string(o.reps), "-p",
          std::to_string(pp), "-n", std::to_string(tg), "-d", std::to_string(depth), "--kv-cache-dtype", kv, "--fill",
          o.fill, "--json"};
}

// Median tokens/s of the peer record matching the test, or 0.
double peer_value(const EngineRun* r, int64_t pp, int64_t tg, int64_t depth, int32_t fa) {
  if (r == nullptr) return 0;
  auto recs = parse_llama_bench_json(r->output);
  if (!recs.ok()) return 0;
  for (const auto& x : *recs) {
    if (x.n_prompt == pp && x.n_gen == tg && x.n_depth == depth && x.flash_attn == fa) return x.median_ts();
  }
  return 0;
}

double ours_value(const EngineRun* r, bool prefill, int64_t depth) {
  if (r == nullptr || !r->output.contains("results")) return 0;
  for (const auto& x : r->output["results"]) {
    const bool is_pp = x.contains("prefill_tokens_per_s");
    if (is_pp != prefill) continue;
    if (!prefill && x.value("depth", int64_t{-1}) != depth) continue;
    const json& s = x[prefill ? "prefill_tokens_per_s" : "decode_tokens_per_s"];
    return s.value("median", 0.0);
  }
  return 0;
}

}  // namespace

namespace {

// What every run needs besides its own arguments.
struct RunContext {
  const PeerBenchOptions& o;
  std::string self;
  std::string model_digest, peer_digest;
  std::string batched_path, batched_digest;  // llama-batched-bench, when the depth rows use it
  PeerCache* cache;
  double max_load;  // cache a peer result only at most this load
  std::string timestamp;
  std::function<void(const std::string&)> say;
};

// The runs, in the order of the table's rows. Each llama-bench run is one process (its peak RSS
// is that configuration's), horizon likewise.
std::vector<Plan> make_plans(const PeerBenchOptions& o, int32_t threads, PeerDepth how) {
  const int64_t pp = o.prompt_tokens, tg = o.gen_tokens, d = o.depth;
  std::vector<Plan> plans;
  auto peer = [&](std::string key, std::string label, std::vector<std::string> args) {
    plans.push_back({EngineRun{"llama.cpp", std::move(label), std::move(args), "llama-bench"}, std::move(key)});
  };
  // A decode row at a depth: llama-bench -d, llama-batched-bench, or no peer run (the row shows "-").
  auto peer_depth = [&](std::string key, int64_t depth, bool q8) {
    const std::string label = fmt::format("tg{} @ d{}, {} KV, fa {}", tg, depth, q8 ? "q8_0" : "f16", q8 ? "on" : "off");
    if (how == PeerDepth::kLlamaBench) {
      peer(std::move(key), label, peer_args(o, threads, 0, tg, depth, q8 ? "1" : "0", q8, how));
    } else if (how == PeerDepth::kBatchedBench) {
      plans.push_back({EngineRun{"llama.cpp", label + " (batched-bench)", batched_args(threads, tg, depth, q8, q8),
                                 "llama-batched-bench"},
                       std::move(key)});
    }
  };
  auto ours = [&](std::string key, std::string label, std::vector<std::string> args) {
    plans.push_back({EngineRun{"horizon", std::move(label), std::move(args)}, std::move(key)});
  };
  peer("p.base", fmt::format("pp{} + tg{}, fa off,on", pp, tg), peer_args(o, threads, pp, tg, 0, "0,1", false, how));
  ours("o.base", fmt::format("pp{} + tg{}, f16 KV", pp, tg), ours_args(o, threads, pp, tg, 0, "f16"));
  if (d > 0) {
    peer_depth("p.f16", d, false);
    ours("o.f16", fmt::format("tg{} @ d{}, f16 KV", tg, d), ours_args(o, threads, 0, tg, d, "f16"));
    peer_depth("p.q8", d, true);
    ours("o.int8", fmt::format("tg{} @ d{}, int8 KV", tg, d), ours_args(o, threads, 0, tg, d, "int8"));
    ours("o.fp8", fmt::format("tg{} @ d{}, fp8 KV", tg, d), ours_args(o, threads, 0, tg, d, "fp8"));
  }
  const int64_t ld = o.long_depth, lp = o.long_prompt;
  if (o.long_rows) {
    peer_depth("p.long.f16", ld, false);
    ours("o.long.f16", fmt::format("tg{} @ d{}, f16 KV", tg, ld), ours_args(o, threads, 0, tg, ld, "f16"));
    peer_depth("p.long.q8", ld, true);
    ours("o.long.int8", fmt::format("tg{} @ d{}, int8 KV", tg, ld), ours_args(o, threads, 0, tg, ld, "int8"));
    ours("o.long.fp8", fmt::format("tg{} @ d{}, fp8 KV", tg, ld), ours_args(o, threads, 0, tg, ld, "fp8"));
    // Flash attention on only: at 16K its CPU path without it materializes 16K x 16K scores per
    // head and is the slower one, and each configuration costs many minutes.
    peer("p.long.pp", fmt::format("pp{}, fa on", lp), peer_args(o, threads, lp, 0, 0, "1", false, how));
    ours("o.long.pp", fmt::format("pp{}, f16 KV", lp), ours_args(o, threads, lp, 0, 0, "f16"));
  }
  return plans;
}

// Runs one engine invocation (or reads the peer's from the cache) into r.
Status execute(const RunContext& ctx, const std::string& prefix, bool use_cache, EngineRun* rp) {
  const PeerBenchOptions& o = ctx.o;
  EngineRun& r = *rp;
  const std::string step = fmt::format("{} {}: {}", prefix, r.engine, r.label);
  if (r.engine == "llama.cpp") {
    const bool batched = r.tool == "llama-batched-bench";
    PeerCacheKey key{ctx.model_digest, batched ? ctx.batched_digest : ctx.peer_digest, r.args};
    if (use_cache) {
      if (auto hit = ctx.cache->load(key)) {
        r.cached = true;
        r.output = (*hit)["results"];
        r.wall_seconds = hit->value("wall_seconds", 0.0);
        r.peak_rss_bytes = hit->value("peak_rss_bytes", uint64_t{0});
        r.max_load = hit->value("max_load", 0.0);
        ctx.say(step + " (cached)");
        return Status();
      }
    }
    ctx.say(step + " ...");
    std::vector<std::string> argv = {o.peer_path, "-m", o.model_path, "-o", "json"};
    if (batched) argv = {ctx.batched_path, "-m", o.model_path};
    argv.insert(argv.end(), r.args.begin(), r.args.end());
    const double load0 = load_average();
    HZ_ASSIGN_OR_RETURN(ChildResult cr, run_child(argv));
    r.max_load = std::max(load0, load_average());
    if (cr.exit_code != 0) {
      return io_error("{} failed (exit {}): {}\n{}", r.tool, cr.exit_code, shell_join(argv), cr.stderr_tail);
    }
    if (batched) {
      const bool q8 = std::find(r.args.begin(), r.args.end(), "-ctk") != r.args.end();
      auto recs = batched_bench_records(cr.stdout_text, q8 ? "q8_0" : "f16", q8 ? "q8_0" : "f16");
      if (!recs.ok()) return io_error("{}: {}", shell_join(argv), recs.status().message());
      r.output = std::move(*recs);
    } else {
      auto recs = parse_llama_bench_json(cr.stdout_text);
      if (!recs.ok()) return io_error("{}: {}", shell_join(argv), recs.status().message());
      r.output = json::parse(cr.stdout_text);
    }
    r.wall_seconds = cr.wall_seconds;
    r.peak_rss_bytes = cr.peak_rss_bytes;
    // Paired rounds (use_cache false in a paired run) never store: a one-repetition figure taken
    // for a side-by-side ratio is not a result to reuse.
    if (o.rounds > 0) {
      ctx.say(fmt::format("{} done in {:.0f} s", step, cr.wall_seconds));
      return Status();
    }
    if (ctx.max_load > 0 && r.max_load > ctx.max_load) {
      ctx.say(fmt::format("{} done in {:.0f} s; not cached: load average {:.1f} > {:.1f}", step, cr.wall_seconds, r.max_load,
                          ctx.max_load));
      return Status();
    }
    HZ_RETURN_IF_ERROR(ctx.cache->store(key, {{"results", r.output},
                                              {"wall_seconds", cr.wall_seconds},
                                              {"peak_rss_bytes", cr.peak_rss_bytes},
                                              {"max_load", r.max_load},
                                              {"command", shell_join(argv)},
                                              {"created", ctx.timestamp}}));
    ctx.say(fmt::format("{} done in {:.0f} s", step, cr.wall_seconds));
    return Status();
  }
  ctx.say(step + " ...");
  std::vector<std::string> argv = {ctx.self};
  argv.insert(argv.end(), r.args.begin(), r.args.end());
  const double load0 = load_average();
  HZ_ASSIGN_OR_RETURN(ChildResult cr, run_child(argv));
  r.max_load = std::max(load0, load_average());
  if (cr.exit_code != 0) return io_error("horizon failed (exit {}): {}\n{}", cr.exit_code, shell_join(argv), cr.stderr_tail);
  r.output = json::parse(cr.stdout_text, nullptr, false);
  if (!r.output.is_object()) return io_error("{}: output is not JSON: '{}'", shell_join(argv), cr.stdout_text.substr(0, 200));
  r.wall_seconds = cr.wall_seconds;
  r.peak_rss_bytes = cr.peak_rss_bytes;
  ctx.say(fmt::format("{} done in {:.0f} s", step, cr.wall_seconds));
  return Status();
}

// The peer build as its own JSON states it (from the first record).
void record_peer_build(const std::vector<Plan>& plans, json* c) {
  for (const auto& p : plans) {
    if (p.run.engine != "llama.cpp" || p.run.tool != "llama-bench") continue;
    auto recs = parse_llama_bench_json(p.run.output);
    if (recs.ok() && !recs->empty()) {
      (*c)["peer_build_commit"] = (*recs)[0].build_commit;
      (*c)["peer_build_number"] = (*recs)[0].build_number;
      return;
    }
  }
}

// The table's rows from the runs of make_plans.
std::vector<ComparisonRow> make_rows(const PeerBenchOptions& o, const std::vector<Plan>& plans) {
  const int64_t pp = o.prompt_tokens, tg = o.gen_tokens, d = o.depth;
  const int64_t ld = o.long_depth, lp = o.long_prompt;
  std::vector<ComparisonRow> rows;
  auto find = [&](const std::string& key) -> const EngineRun* {
    for (const auto& p : plans) {
      if (p.key == key) return &p.run;
    }
    return nullptr;
  };
  auto row = [&](std::string test, std::string pc, std::vector<double> pv, std::string oc, double ov, double target) {
    ComparisonRow r;
    r.test = std::move(test);
    r.peer_config = std::move(pc);
    r.peer_values = std::move(pv);
    r.ours_config = std::move(oc);
    r.ours = ov;
    r.target = target;
    rows.push_back(std::move(r));
  };
  const EngineRun* pb = find("p.base");
  row(fmt::format("prefill pp{}", pp), "fa off / on", {peer_value(pb, pp, 0, 0, 0), peer_value(pb, pp, 0, 0, 1)}, "f16 KV",
      ours_value(find("o.base"), true, 0), 1.0);
  row(fmt::format("decode tg{}, depth 0", tg), "fa off / on", {peer_value(pb, 0, tg, 0, 0), peer_value(pb, 0, tg, 0, 1)},
      "f16 KV", ours_value(find("o.base"), false, 0), 1.0);
  auto depth_rows = [&](int64_t depth, const std::string& pf16, const std::string& pq8, const std::string& of16,
                        const std::string& oi8, const std::string& of8) {
    row(fmt::format("decode tg{} @ d{}, f16 KV", tg, depth), "f16, fa off", {peer_value(find(pf16), 0, tg, depth, 0)}, "f16",
        ours_value(find(of16), false, depth), 1.2);
    const double q8 = peer_value(find(pq8), 0, tg, depth, 1);
    row(fmt::format("decode tg{} @ d{}, 8-bit KV", tg, depth), "q8_0, fa on", {q8}, "int8",
        ours_value(find(oi8), false, depth), 2.0);
    row(fmt::format("decode tg{} @ d{}, 8-bit KV", tg, depth), "q8_0, fa on", {q8}, "fp8",
        ours_value(find(of8), false, depth), 2.0);
  };
  if (d > 0) depth_rows(d, "p.f16", "p.q8", "o.f16", "o.int8", "o.fp8");
  if (o.long_rows) {
    depth_rows(ld, "p.long.f16", "p.long.q8", "o.long.f16", "o.long.int8", "o.long.fp8");
    row(fmt::format("prefill pp{}", lp), "fa on", {peer_value(find("p.long.pp"), lp, 0, 0, 1)}, "f16 KV",
        ours_value(find("o.long.pp"), true, 0), 1.0);
    // Peak RSS of the whole process at the long depth with 8-bit K/V.
    const EngineRun* pq = find("p.long.q8");
    for (const char* k : {"o.long.int8", "o.long.fp8"}) {
      const EngineRun* oq = find(k);
      ComparisonRow r;
      r.test = fmt::format("peak RSS, tg{} @ d{}, 8-bit KV", tg, ld);
      r.peer_config = "q8_0, fa on";
      r.peer_values = {pq != nullptr ? static_cast<double>(pq->peak_rss_bytes) : 0.0};
      r.ours_config = std::string(k).substr(7);
      r.ours = oq != nullptr ? static_cast<double>(oq->peak_rss_bytes) : 0.0;
      r.target = 1.0;
      r.lower_is_better = true;
      r.unit = "bytes";
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

}  // namespace

Result<PeerBenchReport> run_peer_bench(const PeerBenchOptions& o, const PeerProgressFn& progress) {
  if (o.peer_path.empty()) return invalid_argument("--peer: the path of a llama-bench executable is required");
  if (o.model_path.empty()) return invalid_argument("-m: a GGUF model file is required");
  if (o.reps < 1) return invalid_argument("--reps: {} must be at least 1", o.reps);
  if (o.prompt_tokens < 1 || o.gen_tokens < 1 || o.depth < 0) {
    return invalid_argument("--pp and --tg must be at least 1 and --peer-depth at least 0 (got {}, {}, {})", o.prompt_tokens,
                            o.gen_tokens, o.depth);
  }
  if (o.rounds < 0) return invalid_argument("--rounds: {} must be at least 0", o.rounds);
  if (o.long_rows && (o.long_depth < 1 || o.long_prompt < 1)) {
    return invalid_argument("--long-depth and --long-prompt must be at least 1 (got {}, {})", o.long_depth, o.long_prompt);
  }
  if (o.fill != "synthetic" && o.fill != "prefill") return invalid_argument("--fill '{}' is not one of synthetic, prefill", o.fill);
  const int32_t threads = o.threads > 0 ? o.threads : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  std::string self = o.horizon_path;
  if (self.empty()) {
    HZ_ASSIGN_OR_RETURN(self, self_executable());
  }
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };

  say("hashing " + o.model_path);
  auto model_digest = file_digest(o.model_path);
  if (!model_digest.ok()) return invalid_argument("-m: {}", model_digest.status().message());
  auto peer_digest = peer_build_digest(o.peer_path);
  if (!peer_digest.ok()) return invalid_argument("--peer: {}", peer_digest.status().message());
  PeerCache cache(o.cache_dir.empty() ? default_peer_cache_dir() : o.cache_dir);

  PeerBenchReport rep;
  json& c = rep.conditions;
  c = host_conditions();
  const double max_load = o.cache_max_load >= 0 ? o.cache_max_load : 1.5 * c.value("num_cpus", 1);
  c["model_path"] = o.model_path;
  c["model_digest"] = *model_digest;
  c["peer_path"] = o.peer_path;
  c["peer_digest"] = *peer_digest;
  c["peer_cache_dir"] = cache.dir();
  c["threads"] = threads;
  c["reps"] = o.reps;
  c["fill"] = o.fill;
  c["prompt_tokens"] = o.prompt_tokens;
  c["gen_tokens"] = o.gen_tokens;
  c["depth"] = o.depth;
  c["long_rows"] = o.long_rows;
  if (o.long_rows) {
    c["long_depth"] = o.long_depth;
    c["long_prompt"] = o.long_prompt;
  }

  c["rounds"] = o.rounds;
  if (o.rounds > 0) c["reps"] = 1;

  // llama-bench builds from before its -d cannot run the depth rows; llama-batched-bench can.
  // Such a build also rejects "-d 0", so it is asked even when no depth row is wanted.
  PeerDepth how = PeerDepth::kLlamaBench;
  std::string batched_path, batched_digest;
  auto help = run_child({o.peer_path, "--help"});
  if (!help.ok()) return invalid_argument("--peer: cannot run '{}': {}", o.peer_path, help.status().message());
  const bool has_depth =
      help->stdout_text.find("n-depth") != std::string::npos || help->stderr_tail.find("n-depth") != std::string::npos;
  if (!has_depth && o.depth <= 0 && !o.long_rows) how = PeerDepth::kNone;  // no depth rows to run
  if (!has_depth && (o.depth > 0 || o.long_rows)) {
    batched_path = o.batched_bench_path;
    if (batched_path.empty()) {
      const auto beside = std::filesystem::path(o.peer_path).parent_path() / "llama-batched-bench";
      std::error_code ec;
      if (std::filesystem::is_regular_file(beside, ec)) batched_path = beside.string();
    }
    if (batched_path.empty()) {
      how = PeerDepth::kNone;
      say("this llama-bench has no -d and there is no llama-batched-bench beside it (--peer-batched-bench): the "
          "llama.cpp side of the depth rows is left out");
    } else {
      auto d = peer_build_digest(batched_path);
      if (!d.ok()) return invalid_argument("--peer-batched-bench: {}", d.status().message());
      batched_digest = *d;
      how = PeerDepth::kBatchedBench;
      say("this llama-bench has no -d: the depth rows run " + batched_path);
    }
  }
  if (o.depth > 0 || o.long_rows) {
    c["peer_depth_tool"] = how == PeerDepth::kLlamaBench ? "llama-bench" : how == PeerDepth::kBatchedBench ? batched_path : "";
  }

  RunContext ctx{o, self, *model_digest, *peer_digest, batched_path, batched_digest, &cache, max_load,
                 c.value("timestamp", ""), say};
  if (o.rounds <= 0) {
    std::vector<Plan> plans = make_plans(o, threads, how);
    for (size_t i = 0; i < plans.size(); ++i) {
      HZ_RETURN_IF_ERROR(execute(ctx, fmt::format("[{}/{}]", i + 1, plans.size()), /*use_cache=*/o.use_cache, &plans[i].run));
    }
    record_peer_build(plans, &c);
    rep.rows = make_rows(o, plans);
    for (auto& p : plans) rep.runs.push_back(std::move(p.run));
    return rep;
  }
  // Paired: each round runs every test once per engine, the order reversed every other round so
  // that neither engine always goes first after the bandwidth probe.
  PeerBenchOptions one = o;
  one.reps = 1;
  std::vector<std::vector<ComparisonRow>> per_round;
  for (int32_t round = 0; round < o.rounds; ++round) {
    PeerRound pr;
    pr.max_load = load_average();
    say(fmt::format("round {}/{}: probing read bandwidth", round + 1, o.rounds));
    pr.bandwidth_gb_s = probe_read_bandwidth(threads);
    std::vector<Plan> plans = make_plans(one, threads, how);
    std::vector<size_t> order(plans.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = round % 2 == 0 ? i : order.size() - 1 - i;
    for (size_t k = 0; k < order.size(); ++k) {
      EngineRun& r = plans[order[k]].run;
      r.round_idx = round;
      HZ_RETURN_IF_ERROR(execute(ctx, fmt::format("round {}/{} [{}/{}]", round + 1, o.rounds, k + 1, order.size()),
                                 /*use_cache=*/false, &r));
      pr.max_load = std::max(pr.max_load, r.max_load);
    }
    if (round == 0) record_peer_build(plans, &c);
    per_round.push_back(make_rows(one, plans));
    for (auto& p : plans) rep.runs.push_back(std::move(p.run));
    rep.rounds.push_back(pr);
  }
  // Each row: the medians of the rounds' values and the per-round ratios.
  rep.rows = per_round[0];
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    ComparisonRow& row = rep.rows[i];
    std::vector<double> ours;
    std::vector<std::vector<double>> peers(row.peer_values.size());
    for (const auto& rows : per_round) {
      const ComparisonRow& x = rows[i];
      ours.push_back(x.ours);
      for (size_t k = 0; k < peers.size() && k < x.peer_values.size(); ++k) peers[k].push_back(x.peer_values[k]);
      if (x.ratio() > 0) row.round_ratios.push_back(x.ratio());
    }
    row.ours = median_of(ours);
    for (size_t k = 0; k < peers.size(); ++k) row.peer_values[k] = median_of(peers[k]);
  }
  return rep;
}


}  // namespace hz::bench
