// HttpSession: one client connection (keep-alive, one request at a time) and, for completions, the
// round trip to the engine: submit, relay events as SSE chunks or one JSON body, cancel the request
// when the client goes away. Runs on its own strand. Includes Beast: include only from .cc files.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/engine_api.h"
#include "server/api_handler.h"
#include "server/event_channel.h"
#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/request_workers.h"
#include "server/server_options.h"

namespace hz {

// Closed by the server before its io_context goes away; engine-thread wakes check it under the lock
// so nothing is posted to a dead io_context.
struct PostGate {
  std::mutex mu;
  bool open = true;
};

// What every session shares; owned by the server, which outlives all sessions.
struct SessionContext {
  Engine* engine = nullptr;
  const ServerOptions* options = nullptr;
  ApiHandler* handler = nullptr;
  ServerMetrics* metrics = nullptr;
  std::shared_ptr<PostGate> gate;
  std::atomic<int>* active_requests = nullptr;  // requests read and not yet fully answered
  std::atomic<bool>* shutting_down = nullptr;
  RequestWorkers* workers = nullptr;  // null: requests are handled on the I/O thread
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  using Clock = std::chrono::steady_clock;

  HttpSession(boost::asio::ip::tcp::socket socket, SessionContext ctx);
  ~HttpSession();
  void start();

 private:
  struct Generation;  // the state of one running completion

  void do_read();
  void on_header(boost::beast::error_code ec);
  void on_read(boost::beast::error_code ec);
  void begin_request();  // a request's head is read: start its bookkeeping
  void refuse_head(const std::string& why);
  // The handler's answer (on this session's strand): a reply to send, or a generation to start.
  void on_handled(std::variant<HttpReply, GenerationPlan> result);
  void send_reply(const HttpReply& reply, bool keep_alive);
  void on_reply_written(bool keep_alive, boost::beast::error_code ec);

  void start_generation(GenerationPlan plan);
  void watch_disconnect();
  void cancel_choices();  // every submitted choice not finished yet
  Status submit_choice(size_t i);
  Status submit_ready();
  void fail_submission(const Status& s);
  void on_client_gone(const char* why);
  void on_events();
  void flush_stream();
  void on_stream_written();
  void finish_generation_reply();

  // Bookkeeping once a request is fully answered (or abandoned): metrics, access log, counters.
  void complete_request(int status);
  void lingering_close();
  void discard_more();
  void close();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  // Pending while the engine works on a request: its handler holds the session alive (the engine's
  // sink only holds a weak reference) and goes away with the io_context at shutdown.
  boost::asio::steady_timer hold_;
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> reply_;
  SessionContext ctx_;
  std::string peer_;
  std::string peer_address_;  // the IP alone (rate limits)
  std::shared_ptr<std::array<char, 4096>> discard_;  // lingering close: bytes read and dropped
  size_t discarded_bytes_ = 0;

  // The current request.
  bool request_active_ = false;
  Clock::time_point request_start_;
  std::string method_;
  std::string path_;
  unsigned http_version_ = 11;
  bool keep_alive_ = true;
  std::unique_ptr<Generation> gen_;
  CorsPolicy::Headers cors_headers_;  // added to every answer to the current request
  uint64_t gen_serial_ = 0;  // tells a stale disconnect watcher from the current one
};

}  // namespace hz
