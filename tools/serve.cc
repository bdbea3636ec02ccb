// `horizon serve -m MODEL`: the OpenAI-compatible HTTP server (vLLM's flag names where vLLM has one).
// This file only wires flags -> EngineFlags / ServerOptions, the engine, the server and signals.
#include <signal.h>

#include <cstdlib>
#include <memory>

#include "base/log.h"
#include "runtime/engine_api.h"
#include "server/http_server.h"
#include "tools/cli.h"

namespace hz::cli {
namespace {

// Model, KV and scheduler flags: everything the engine needs. The lead extends this struct as the
// engine grows; defaults are meant to work on a 2-core machine with the default model.
struct EngineFlags {
  std::string model;                // GGUF file
  int max_num_seqs = 16;            // sequences in the running batch at most
  int max_num_batched_tokens = 512; // tokens per engine step (prefill chunks + decodes)
  int max_model_len = 0;            // prompt + output per sequence; 0 = the model's context length
  std::string kv_budget;            // KV cache memory, e.g. "512MiB"; empty = automatic
  std::string kv_cache_dtype = "auto";
  bool enable_prefix_caching = false;
  int threads = 0;                  // compute threads; 0 = all cores
  int max_queue = 64;               // waiting requests at most (more -> 429)
};

// TODO(#5): the lead replaces this with the real engine (load the model, start the engine thread).
Result<std::unique_ptr<Engine>> make_engine(const EngineFlags& flags) {
  (void)flags;
  return unimplemented("engine not available in this build yet (see make_engine in tools/serve.cc)");
}

struct ServeFlags {
  EngineFlags engine;
  ServerOptions server;
  double request_timeout_s = 600;
  double shutdown_grace_s = 10;
  double idle_timeout_s = 60;
  bool disable_log_requests = false;
};

int run_serve(ServeFlags& f) {
  // Block SIGINT/SIGTERM before any thread starts (threads inherit the mask), then take them
  // synchronously with sigwait below: no async-signal-safety puzzles.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (f.server.api_key.empty()) {
    const char* env = std::getenv("HORIZON_API_KEY");
    if (env != nullptr) f.server.api_key = env;
  }
  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  f.server.request_timeout = ms(f.request_timeout_s);
  f.server.shutdown_grace = ms(f.shutdown_grace_s);
  f.server.idle_timeout = ms(f.idle_timeout_s);
  f.server.access_log = !f.disable_log_requests;

  auto engine = make_engine(f.engine);
  if (!engine.ok()) return fail(engine.status().message());
  HttpServer server(**engine, f.server);
  Status s = server.start();
  if (!s.ok()) return fail(s.message());

  int sig = 0;
  sigwait(&signals, &sig);
  HZ_LOG_INFO("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
  return 0;
}

Subcommand kServe("serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  EngineFlags& e = f->engine;
  ServerOptions& o = f->server;
  app.add_option("-m,--model,model_path", e.model, "GGUF model file")->required();
  app.add_option("--host", o.host, "Address to bind (an IP address)")->capture_default_str();
  app.add_option("--port", o.port, "Port to listen on (0 = any free port)")->capture_default_str()->check(
      CLI::Range(0, 65535));
  app.add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on /v1/* (or env HORIZON_API_KEY)");
  app.add_option("--served-model-name", o.served_model_name, "Model name in responses (default: the model's)");
  app.add_option("--max-num-seqs", e.max_num_seqs, "Most sequences in one batch")->capture_default_str()->check(
      CLI::PositiveNumber);
  app.add_option("--max-num-batched-tokens", e.max_num_batched_tokens, "Most tokens per engine step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-model-len", e.max_model_len, "Prompt + output tokens per sequence (0 = the model's)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-budget", e.kv_budget, "Memory for the KV cache, e.g. 512MiB (default: automatic)");
  app.add_option("--kv-cache-dtype", e.kv_cache_dtype, "KV cache element type")->capture_default_str();
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", e.enable_prefix_caching,
               "Reuse KV blocks of shared prompt prefixes");
  app.add_option("--threads", e.threads, "Compute threads (0 = all cores)")->capture_default_str()->check(
      CLI::NonNegativeNumber);
  app.add_option("--max-queue", e.max_queue, "Waiting requests at most; more get 429")->capture_default_str()->check(
      CLI::PositiveNumber);
  app.add_option("--http-threads", o.http_threads, "Threads for HTTP I/O")->capture_default_str()->check(
      CLI::Range(1, 64));
  app.add_option("--max-body-bytes", o.max_body_bytes, "Largest request body (larger -> 413)")->capture_default_str();
  app.add_option("--request-timeout", f->request_timeout_s, "Seconds a request may run (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-timeout", f->idle_timeout_s, "Seconds to read a request / keep an idle connection")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--shutdown-grace", f->shutdown_grace_s, "Seconds running requests get on SIGTERM/SIGINT")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--normalize-newlines", o.normalize_newlines, "Turn CRLF into LF in prompts and messages");
  app.add_flag("--disable-log-requests", f->disable_log_requests, "No access-log line per request");
  return [f] { return run_serve(*f); };
});

}  // namespace
}  // namespace hz::cli
