#include "server/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <future>
#include <thread>
#include <vector>

#include "base/log.h"
#include "server/api_handler.h"
#include "server/http_session.h"

namespace hz {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpServer::Impl {
  Impl(Engine& e, ServerOptions o)
      : engine(e),
        options(std::move(o)),
        metrics(MetricsOptions{served_model_name(engine, options), options.metrics_vllm_names}),
        handler(engine, options, metrics) {}

  void do_accept();

  Engine& engine;
  const ServerOptions options;
  ServerMetrics metrics;
  ApiHandler handler;
  std::shared_ptr<PostGate> gate = std::make_shared<PostGate>();
  std::atomic<int> active_requests{0};
  std::atomic<bool> shutting_down{false};
  int port = 0;

  std::mutex state_mu;
  std::condition_variable state_cv;
  bool started = false;
  bool stopped = false;
  bool shutdown_started = false;
  bool drained_cleanly = true;

  std::vector<std::thread> threads;
  std::unique_ptr<RequestWorkers> workers;
  // Declared last: destroyed first, so sessions (destroyed with the io_context's pending handlers)
  // still see the handler, metrics and options above.
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  net::steady_timer accept_retry{acceptor.get_executor()};
};

void HttpServer::Impl::do_accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: back off a little instead of spinning.
      HZ_LOG_WARN("accept failed: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec && acceptor.is_open()) do_accept();
      });
      return;
    }
    SessionContext ctx;
    ctx.engine = &engine;
    ctx.options = &options;
    ctx.handler = &handler;
    ctx.metrics = &metrics;
    ctx.gate = gate;
    ctx.active_requests = &active_requests;
    ctx.shutting_down = &shutting_down;
    ctx.workers = workers.get();
    std::make_shared<HttpSession>(std::move(socket), std::move(ctx))->start();
    do_accept();
  });
}

HttpServer::HttpServer(Engine& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

HttpServer::~HttpServer() {
  bool running;
  {
    std::lock_guard<std::mutex> lock(impl_->state_mu);
    running = impl_->started && !impl_->shutdown_started;
  }
  if (running) shutdown();
}

Status HttpServer::start() {
  Impl& s = *impl_;
  if (s.started) return make_error(StatusCode::kInternal, "HttpServer::start called twice");
  boost::system::error_code ec;
  auto address = net::ip::make_address(s.options.host, ec);
  if (ec) return invalid_argument("--host '{}' is not an IP address: {}", s.options.host, ec.message());
  if (s.options.port < 0 || s.options.port > 65535) return invalid_argument("--port {} is out of range", s.options.port);
  if (s.options.http_threads < 1) return invalid_argument("http threads must be at least 1");
  tcp::endpoint endpoint(address, static_cast<uint16_t>(s.options.port));
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return io_error("cannot listen on {}:{}: {}", s.options.host, s.options.port, ec.message());
  s.port = s.acceptor.local_endpoint().port();
  if (s.options.request_threads > 0) {
    s.workers = std::make_unique<RequestWorkers>(s.options.request_threads,
                                                 static_cast<size_t>(std::max(1, s.options.max_pending_requests)));
  }
  s.work.emplace(s.ioc.get_executor());
  s.do_accept();
  for (int i = 0; i < s.options.http_threads; ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
  {
    std::lock_guard<std::mutex> lock(s.state_mu);
    s.started = true;
  }
  HZ_LOG_INFO("serving {} on http://{}:{} ({} HTTP threads{})", s.handler.served_model_name(), s.options.host, s.port,
              s.options.http_threads, s.options.api_keys.empty() ? "" : ", API key required");
  return Status();
}

void HttpServer::wait() {
  std::unique_lock<std::mutex> lock(impl_->state_mu);
  impl_->state_cv.wait(lock, [this] { return impl_->stopped || !impl_->started; });
}

bool HttpServer::shutdown() {
  Impl& s = *impl_;
  {
    std::unique_lock<std::mutex> lock(s.state_mu);
    if (!s.started) return true;
    if (s.shutdown_started) {
      // Another thread is at it: wait for it to finish.
      s.state_cv.wait(lock, [&s] { return s.stopped; });
      return s.drained_cleanly;
    }
    s.shutdown_started = true;
  }
  using Clock = std::chrono::steady_clock;
  HZ_LOG_INFO("shutting down: no new connections, draining {} running requests (grace {} ms)",
              s.active_requests.load(), s.options.shutdown_grace.count());
  // 1. Stop accepting (the acceptor lives on its strand).
  s.shutting_down.store(true);
  s.handler.set_shutting_down();
  std::promise<void> closed;
  net::dispatch(s.acceptor.get_executor(), [&s, &closed] {
    boost::system::error_code ec;
    s.acceptor.close(ec);
    s.accept_retry.cancel();
    closed.set_value();
  });
  closed.get_future().wait();
  // Bodies being read finish (queued ones are answered 503 at once) and post their answers while
  // the HTTP threads still run.
  if (s.workers) s.workers->stop();
  // 2. The engine refuses new work (submit -> kCancelled -> 503) and finishes what it has; after the
  // grace period it cancels the rest, whose clients then get their error chunk or 503.
  s.engine.begin_drain();
  bool clean = s.engine.wait_idle(s.options.shutdown_grace);
  // 3. Let the sessions write their last bytes (bounded: a stuck client must not hold the exit).
  auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(s.options.shutdown_grace, std::chrono::seconds(5)) +
                  std::chrono::milliseconds(200);
  while (s.active_requests.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (s.active_requests.load() > 0) clean = false;
  // 4. Stop: no more posts from the engine thread, then stop and join the HTTP threads. Idle
  // keep-alive connections are dropped with the io_context.
  {
    std::lock_guard<std::mutex> lock(s.gate->mu);
    s.gate->open = false;
  }
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  HZ_LOG_INFO("shutdown complete ({})", clean ? "all requests finished" : "some requests were cancelled");
  {
    std::lock_guard<std::mutex> lock(s.state_mu);
    s.stopped = true;
    s.drained_cleanly = clean;
  }
  s.state_cv.notify_all();
  return clean;
}

int HttpServer::port() const { return impl_->port; }

const ServerMetrics& HttpServer::metrics() const { return impl_->metrics; }

}  // namespace hz
