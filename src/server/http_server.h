// HttpServer: the OpenAI-compatible HTTP front end over an Engine. Boost.Asio/Beast stay inside
// http_server.cc / http_session.cc (pimpl), so including this header is cheap.
// Lifecycle: start() binds and starts the HTTP threads; shutdown() (any thread, idempotent) stops
// accepting, drains the engine, lets running requests finish within the grace period, then stops.
#pragma once

#include <memory>

#include "base/status.h"
#include "runtime/engine_api.h"
#include "server/metrics.h"
#include "server/server_options.h"

namespace hz {

class HttpServer {
 public:
  // `engine` must outlive the server.
  HttpServer(Engine& engine, ServerOptions options);
  ~HttpServer();  // shuts down when still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  Status start();
  // Blocks until shutdown() has finished.
  void wait();
  // Graceful stop; returns once the HTTP threads are joined. True when every running request
  // finished within the grace period (false: the rest were cancelled).
  bool shutdown();
  // The bound port (useful with ServerOptions::port = 0); 0 before start().
  int port() const;

  const ServerMetrics& metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hz
