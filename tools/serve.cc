// `horizon serve -m MODEL`: the OpenAI-compatible HTTP server (vLLM's flag names where vLLM has one).
// This file only wires flags -> EngineFlags / ServerOptions, the engine, the server and signals.
#include <signal.h>

#include <cstdlib>
#include <memory>

#include "base/log.h"
#include "runtime/engine_api.h"
#include "server/http_server.h"
#include "runtime/local_engine.h"
#include "tools/cli.h"
#include "tools/engine_flags.h"

namespace hz::cli {
namespace {

Result<std::unique_ptr<Engine>> make_engine(const EngineFlags& flags) {
  HZ_ASSIGN_OR_RETURN(EngineOptions opts, flags.resolve());
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<LocalEngine> e, LocalEngine::create(opts));
  return std::unique_ptr<Engine>(std::move(e));
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
  if (f.server.metrics_auth && f.server.api_key.empty()) return fail("--metrics-auth needs --api-key (or HORIZON_API_KEY)");

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
  // Serving defaults: more sequences per batch than `run` needs.
  e.opts.max_num_seqs = 16;
  e.add_to(app, /*server=*/true);
  app.add_option("--host", o.host, "Address to bind (an IP address)")->capture_default_str();
  app.add_option("--port", o.port, "Port to listen on (0 = any free port)")->capture_default_str()->check(
      CLI::Range(0, 65535));
  app.add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on /v1/* (or env HORIZON_API_KEY)");
  app.add_flag("--metrics-auth", o.metrics_auth, "/metrics needs the API key too");
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
  app.add_flag("--allow-special-in-content", o.allow_special_in_content,
               "Parse special tokens (e.g. <|im_end|>) written in chat messages; by default they are plain text");
  app.add_flag("--disable-log-requests", f->disable_log_requests, "No access-log line per request");
  return [f] { return run_serve(*f); };
});

}  // namespace
}  // namespace hz::cli
