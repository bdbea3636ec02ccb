// `horizon serve MODEL` (or -m MODEL): the OpenAI-compatible HTTP server (vLLM's flag names where
// vLLM has one, llama-server's where it has one). This file wires flags -> EngineOptions /
// ServerOptions (tools/serve_flags.h), the engine, the server and signals, and prints the
// effective configuration and a start-up summary.
#include <signal.h>

#include <cstdlib>
#include <memory>
#include <thread>

#include "base/byte_size.h"
#include "base/log.h"
#include "chat/reasoning.h"
#include "runtime/engine_api.h"
#include "runtime/local_engine.h"
#include "server/http_server.h"
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/model_sampling.h"
#include "tools/progress.h"
#include "tools/serve_flags.h"

namespace hz::cli {
namespace {

// What a user wants to know once the server is up, one fact per line.
// --generation-config auto: requests' missing sampling fields take the model's defaults. Returns
// what was taken, for the summary ("" for none).
std::string apply_model_sampling_defaults(const Model& model, ServeFlags& f) {
  if (f.generation_config != "auto") return "";
  const ModelSampling m = model_sampling(model.file());
  SamplingDefaults& d = f.server.sampling_defaults;
  std::string list;
  auto take = [&](const char* name, const auto& value, auto* out) {
    if (!value) return;
    *out = *value;
    list += fmt::format("{}{} {}", list.empty() ? "" : ", ", name, *value);
  };
  take("temperature", m.temperature, &d.temperature);
  take("top_p", m.top_p, &d.top_p);
  take("min_p", m.min_p, &d.min_p);
  take("repetition_penalty", m.repetition_penalty, &d.repetition_penalty);
  take("top_k", m.top_k, &d.top_k);
  if (list.empty()) return "";
  return "the model's defaults for requests that leave them out: " + list + " (--generation-config vllm: OpenAI's)";
}

std::string startup_summary(const LocalEngine& e, const ServeFlags& f, const std::string& url,
                            const std::string& sampling_note) {
  const EngineOptions& o = e.options();
  const KvPlan& kv = e.kv_plan();
  const ModelInfo& info = e.model_info();
  const EngineStats st = e.stats();
  const int64_t blocks = kv.num_blocks;
  const int64_t tokens = blocks * kv.block_tokens;
  const uint64_t kv_bytes = static_cast<uint64_t>(blocks) * kv.block_bytes;
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool on_device = e.device_model() != nullptr;
  std::string tiers = fmt::format("{} {}", on_device ? "GPU memory" : "RAM", format_bytes(kv_bytes));
  if (st.kv_disk_enabled) tiers += fmt::format(", disk prefix store {} ({})", o.kv_disk_dir, format_bytes(o.kv_disk_budget_bytes));
  if (st.kv_far_enabled) tiers += ", far blocks of long contexts on disk";
  if (st.kv_remote_enabled) tiers += ", remote prefixes shared through Redis";
  std::string tmpl;
  if (!f.chat_template_origin.empty()) {
    tmpl = f.chat_template_origin;
  } else if (!info.chat_template.empty()) {
    tmpl = "the model's";
  } else {
    tmpl = "ChatML (the model has none; --chat-template NAME|FILE to choose)";
  }
  std::string s;
  s += fmt::format("  model          {} ({}, {})\n", info.name, e.model().config().arch, o.model_path);
  s += fmt::format("  context        {} tokens per sequence\n", o.max_model_len);
  if (on_device)
    s += fmt::format("  device         {} (weights {})\n", o.device == EngineDevice::kCuda ? "cuda" : "cuda, host emulation",
                     format_bytes(e.device_model()->weight_bytes()));
  s += fmt::format("  KV cache       {}, {} blocks of {} tokens = {} tokens, {}{}\n", kv_precision_name(kv.precision), blocks,
                   kv.block_tokens, tokens, format_bytes(kv_bytes),
                   o.enable_prefix_caching ? ", prefix caching on" : "");
  s += fmt::format("  KV tiers       {}\n", tiers);
  s += fmt::format("  max sequences  {} (queue {})\n", o.max_num_seqs, o.max_queue);
  s += fmt::format("  threads        {}\n", threads);
  s += fmt::format("  chat template  {}\n", tmpl);
  std::optional<ReasoningTags> reasoning;
  if (f.server.reasoning_parser == "auto") {
    reasoning = detect_reasoning_tags(f.server.chat_template.empty() ? info.chat_template : f.server.chat_template);
  } else if (f.server.reasoning_parser != "none") {
    reasoning = reasoning_tags_by_name(f.server.reasoning_parser);
  }
  if (!sampling_note.empty()) s += fmt::format("  sampling       {}\n", sampling_note);
  if (reasoning) {
    s += fmt::format("  reasoning      {} ... {} returned as reasoning_content{}\n", reasoning->open, reasoning->close,
                     f.server.reasoning_budget < 0 ? ""
                     : f.server.reasoning_budget == 0
                         ? "; closed at once (--reasoning-budget 0)"
                         : fmt::format("; closed after {} tokens unless a request sets thinking_token_budget",
                                       f.server.reasoning_budget));
  }
  s += fmt::format("  URL            {}{}\n", url, f.server.api_keys.empty() ? "" : " (API key required)");
  return s;
}

int run_serve(ServeFlags& f, const CLI::App& app) {
  // Block SIGINT/SIGTERM before any thread starts (threads inherit the mask), then take them
  // synchronously with sigwait below: no async-signal-safety puzzles.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Status rs = f.resolve_server();
  if (!rs.ok()) return fail(rs.message());
  auto opts = f.engine.resolve();
  if (!opts.ok()) return fail(opts.status().message());
  if (!f.engine.quiet) fmt::print(stderr, "effective configuration (usable as --config FILE):\n{}", effective_config_yaml(app, "  "));

  auto engine = [&] {
    LibraryProgress progress(f.engine.quiet);
    return LocalEngine::create(*opts);
  }();
  if (!engine.ok()) return fail(engine.status().message());
  const std::string sampling_note = apply_model_sampling_defaults((**engine).model(), f);
  HttpServer server(**engine, f.server);
  Status s = server.start();
  if (!s.ok()) return fail(s.message());
  const std::string host = f.server.host.find(':') != std::string::npos ? "[" + f.server.host + "]" : f.server.host;
  const std::string url = fmt::format("http://{}:{}/v1", host, server.port());
  if (!f.engine.quiet) fmt::print(stderr, "horizon is serving:\n{}", startup_summary(**engine, f, url, sampling_note));

  int sig = 0;
  sigwait(&signals, &sig);
  HZ_LOG_INFO("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
  return 0;
}

Subcommand kServe("serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  add_config_flag(app);
  f->add_to(app);
  CLI::App* self = &app;
  return [f, self] { return run_serve(*f, *self); };
});

}  // namespace
}  // namespace hz::cli
