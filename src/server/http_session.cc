#include "server/http_session.h"

#include <fmt/format.h>

#include <array>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "base/check.h"
#include "base/log.h"
#include "server/api_error.h"
#include "server/auth.h"

namespace hz {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9112 framing rules a server must enforce, since a proxy in front of it may frame the same
// bytes differently (request smuggling): the message to answer with 400, or empty when the head
// is acceptable. The connection is closed after such an answer.
std::optional<std::string> framing_error(const http::request<http::string_body>& req) {
  int num_host = 0, num_te = 0, num_cl = 0;
  std::string_view last_coding;
  for (const auto& f : req) {
    switch (f.name()) {
      case http::field::host: ++num_host; break;
      case http::field::content_length: ++num_cl; break;
      case http::field::transfer_encoding: {
        ++num_te;
        std::string_view v(f.value().data(), f.value().size());
        size_t comma = v.rfind(',');
        last_coding = trim(comma == std::string_view::npos ? v : v.substr(comma + 1));
        break;
      }
      default: break;
    }
  }
  if (num_te > 0 && num_cl > 0) return "a request may not have both Transfer-Encoding and Content-Length";
  if (num_te > 0 && req.version() < 11) return "Transfer-Encoding is not allowed in an HTTP/1.0 request";
  if (num_te > 0 && !beast::iequals(beast::string_view(last_coding.data(), last_coding.size()), "chunked"))
    return "the final Transfer-Encoding of a request must be chunked";
  if (num_host > 1) return "a request may not have more than one Host header";
  if (num_host == 0 && req.version() >= 11) return "an HTTP/1.1 request must have a Host header";
  return std::nullopt;
}

}  // namespace

struct HttpSession::Generation {
  // One engine request per choice (`n` per prompt; usually one in all).
  struct Choice {
    Choice(const ResponseContext& ctx, size_t leader) : assembler(ctx), leader(leader) {}
    CompletionAssembler assembler;
    size_t leader;  // its prompt's first choice (itself for that one)
    std::shared_ptr<EventChannel> channel;
    uint64_t engine_id = 0;
    bool submitted = false;
    bool finished = false;        // its kFinished seen (or never submitted)
    GenerationEvent final_event;  // its kFinished
    std::optional<Clock::time_point> last_event;
  };

  explicit Generation(GenerationPlan p) : plan(std::move(p)) {
    HZ_CHECK(!plan.choices.empty());
    const auto n = static_cast<int32_t>(plan.choices.size());
    for (int32_t i = 0; i < n; ++i) {
      ResponseContext ctx = plan.response;
      ctx.choice_index = i;
      ctx.num_choices = n;
      if (ctx.echo_prompt) ctx.echo_text = plan.echo_texts[static_cast<size_t>(plan.choices[i].prompt)];
      const size_t leader = i > 0 && plan.choices[i - 1].prompt == plan.choices[i].prompt ? choices.back()->leader
                                                                                         : static_cast<size_t>(i);
      choices.push_back(std::make_unique<Choice>(ctx, leader));
    }
  }
  CompletionAssembler& first() { return choices.front()->assembler; }
  // A choice failed or could not be queued: the others are cancelled.
  bool failed() const { return failure.has_value() || submit_error.has_value(); }
  bool any_submitted() const {
    for (const auto& c : choices) {
      if (c->submitted) return true;
    }
    return false;
  }
  bool any_running() const {
    for (const auto& c : choices) {
      if (c->submitted && !c->finished) return true;
    }
    return false;
  }
  bool all_finished() const {
    for (const auto& c : choices) {
      if (!c->finished) return false;
    }
    return true;
  }
  // The request's outcome once every choice has finished: the first failure's event, else
  // the first choice's with the usage summed: completion tokens of every choice, prompt (and
  // cached) tokens once per prompt, as OpenAI counts them.
  GenerationEvent outcome() const {
    if (failure) return *failure;
    GenerationEvent e = choices.front()->final_event;
    e.completion_tokens = 0;
    e.prompt_tokens = 0;
    e.cached_tokens = 0;
    for (size_t i = 0; i < choices.size(); ++i) {
      const GenerationEvent& f = choices[i]->final_event;
      e.completion_tokens += f.completion_tokens;
      if (choices[i]->leader != i) continue;
      e.prompt_tokens += f.prompt_tokens;
      e.cached_tokens += f.cached_tokens;
    }
    return e;
  }

  GenerationPlan plan;
  std::vector<std::unique_ptr<Choice>> choices;
  std::optional<ApiError> submit_error;  // non-streamed: a choice after the first could not be queued
  bool chunked = true;          // HTTP/1.1 streams use chunked encoding; 1.0 ones end with the connection
  bool finished = false;        // every choice's kFinished seen
  std::optional<GenerationEvent> failure;  // the first failed choice's kFinished (or a stream's refusal)
  bool client_gone = false;
  bool writing = false;
  bool terminated = false;      // the last bytes of the stream are queued or sent
  bool replied = false;         // non-streamed: the response is being written
  std::string header;           // stream: the response head, sent with the first write
  std::string pending;          // stream: SSE text not yet written
  std::string write_buf;        // stream: the write in flight
  GenerationEvent final_event;  // outcome(), once finished
  int status = 200;
  // Latency bookkeeping, from event arrival times.
  std::optional<Clock::time_point> first_token;
  uint64_t tokens_seen = 0;
};

HttpSession::HttpSession(tcp::socket socket, SessionContext ctx)
    : stream_(std::move(socket)), hold_(stream_.get_executor()), ctx_(std::move(ctx)) {
  beast::error_code ec;
  // Streams are many small writes: without this, Nagle + the client's delayed ACK hold each SSE
  // chunk up to ~40 ms.
  stream_.socket().set_option(tcp::no_delay(true), ec);
  auto ep = stream_.socket().remote_endpoint(ec);
  peer_address_ = ec ? "?" : ep.address().to_string();
  peer_ = ec ? "?" : fmt::format("{}:{}", peer_address_, ep.port());
}

HttpSession::~HttpSession() = default;

void HttpSession::start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
}

void HttpSession::do_read() {
  parser_.emplace();
  parser_->header_limit(ctx_.options->max_header_bytes);
  parser_->body_limit(ctx_.options->max_body_bytes);
  stream_.expires_after(ctx_.options->idle_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpSession::on_header(beast::error_code ec) {
  if (ec) return on_read(ec);
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code ec, size_t) { self->on_read(ec); });
  };
  // curl and others send `Expect: 100-continue` with larger bodies and wait for this interim
  // answer before sending the body (about a second, otherwise).
  const auto& req = parser_->get();
  if (auto why = framing_error(req)) return refuse_head(*why);
  auto expect = req.find(http::field::expect);
  if (expect != req.end() && beast::iequals(expect->value(), "100-continue") && req.version() >= 11) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    return net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                            [self = shared_from_this(), read_body](beast::error_code ec, size_t) {
                              if (ec) return self->close();
                              read_body();
                            });
  }
  read_body();
}

// Answers 400 to a request whose head is not acceptable, without reading its body, and closes.
void HttpSession::refuse_head(const std::string& why) {
  begin_request();
  ApiError e;
  e.message = fmt::format("malformed HTTP request: {}", why);
  send_reply(ApiHandler::error_reply(e), /*keep_alive=*/false);
}

void HttpSession::begin_request() {
  request_start_ = Clock::now();
  const auto& req = parser_->get();
  method_ = std::string(req.method_string());
  // Redacted before truncation, so that a cut cannot leave part of a key in the log.
  path_ = redact_target(std::string_view(req.target().data(), req.target().size()), ctx_.options->api_keys).substr(0, 256);
  http_version_ = req.version() == 10 ? 10 : 11;
  auto origin = req.find(http::field::origin);
  cors_headers_ = ctx_.handler->cors().response_headers(
      origin == req.end() ? std::string_view() : std::string_view(origin->value().data(), origin->value().size()));
  request_active_ = true;
  ctx_.active_requests->fetch_add(1);
}

void HttpSession::on_read(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset) {
    return close();
  }
  begin_request();
  const auto& req = parser_->get();
  if (ec) {
    // A request we cannot read to the end: answer once, then drop the connection (the rest of
    // its bytes are unread and the stream is out of sync).
    ApiError e;
    if (ec == http::error::body_limit) {
      e.http_status = 413;
      e.code = "request_too_large";
      e.message = fmt::format("the request body is larger than the limit of {} bytes", ctx_.options->max_body_bytes);
    } else if (ec == http::error::header_limit) {
      e.http_status = 431;
      e.message = fmt::format("the request headers are larger than the limit of {} bytes",
                              ctx_.options->max_header_bytes);
    } else {
      e.message = fmt::format("malformed HTTP request: {}", ec.message());
    }
    return send_reply(ApiHandler::error_reply(e), /*keep_alive=*/false);
  }
  keep_alive_ = req.keep_alive() && !ctx_.shutting_down->load();
  HttpRequestInfo info;
  auto sv = [](beast::string_view v) { return std::string_view(v.data(), v.size()); };
  // HEAD is answered as GET without the body (load balancers probe /health so).
  info.method = req.method() == http::verb::head ? std::string_view("GET") : sv(req.method_string());
  info.target = sv(req.target());
  // The absolute form (RFC 9112 3.2.2: "GET http://host/health", what proxies send): the path part.
  if (info.target.starts_with("http://") || info.target.starts_with("https://")) {
    const size_t authority = info.target.find("//") + 2;
    const size_t slash = info.target.find_first_of("/?", authority);
    info.target = slash == std::string_view::npos ? std::string_view("/") : info.target.substr(slash);
    if (info.target.starts_with("?")) info.target = "/";
  }
  auto auth = req.find(http::field::authorization);
  if (auth != req.end()) info.authorization = sv(auth->value());
  auto inm = req.find(http::field::if_none_match);
  if (inm != req.end()) info.if_none_match = sv(inm->value());
  auto field = [&](http::field f) {
    auto it = req.find(f);
    return it == req.end() ? std::string_view() : sv(it->value());
  };
  if (auto key = req.find("x-api-key"); key != req.end()) info.x_api_key = sv(key->value());
  info.origin = field(http::field::origin);
  info.cors_method = field(http::field::access_control_request_method);
  info.cors_headers = field(http::field::access_control_request_headers);
  info.body = req.body();
  info.peer_address = peer_address_;
  // Bodies (JSON, chat rendering, tokenization: up to a second for megabytes) are handled by the
  // worker threads; the request's bytes stay in parser_, untouched until the answer is back.
  if (req.method() != http::verb::post || ctx_.workers == nullptr) return on_handled(ctx_.handler->handle(info));
  std::shared_ptr<PostGate> gate = ctx_.gate;
  bool queued = ctx_.workers->try_post([self = shared_from_this(), gate, info] {
    std::variant<HttpReply, GenerationPlan> result;
    if (self->ctx_.shutting_down->load()) {
      ApiError e;
      e.http_status = 503;
      e.type = "server_error";
      e.code = "shutting_down";
      e.message = "the server is shutting down";
      result = ApiHandler::error_reply(e);
    } else {
      result = self->ctx_.handler->handle(info);
    }
    std::lock_guard<std::mutex> lock(gate->mu);
    if (!gate->open) return;
    net::post(self->stream_.get_executor(),
              [self, r = std::move(result)]() mutable { self->on_handled(std::move(r)); });
  });
  if (!queued) {
    ApiError e;
    e.http_status = 503;
    e.type = "server_error";
    e.code = "server_busy";
    e.message = fmt::format("the server is busy: {} requests are being read; retry shortly",
                            ctx_.options->max_pending_requests);
    e.headers.emplace_back("Retry-After", "1");
    send_reply(ApiHandler::error_reply(e), keep_alive_);
  }
}

void HttpSession::on_handled(std::variant<HttpReply, GenerationPlan> result) {
  if (auto* reply = std::get_if<HttpReply>(&result)) return send_reply(*reply, keep_alive_);
  start_generation(std::move(std::get<GenerationPlan>(result)));
}

void HttpSession::send_reply(const HttpReply& r, bool keep_alive) {
  reply_ = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), http_version_);
  reply_->set(http::field::server, "horizon");
  reply_->set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : cors_headers_) reply_->set(name, value);
  for (const auto& [name, value] : r.headers) reply_->set(name, value);
  if (gen_) reply_->set("X-Request-Id", gen_->plan.response.id);
  reply_->keep_alive(keep_alive);
  reply_->body() = r.body;
  reply_->prepare_payload();
  if (method_ == "HEAD") {  // the GET reply's headers, Content-Length included, and no body
    const size_t n = reply_->body().size();
    reply_->body().clear();
    reply_->content_length(n);
  }
  if (gen_) gen_->status = r.status;
  int status = r.status;
  stream_.expires_after(ctx_.options->write_timeout);
  http::async_write(stream_, *reply_, [self = shared_from_this(), keep_alive, status](beast::error_code ec, size_t) {
    self->complete_request(status);
    self->on_reply_written(keep_alive, ec);
  });
}

void HttpSession::on_reply_written(bool keep_alive, beast::error_code ec) {
  reply_.reset();
  if (ec) return close();
  if (!keep_alive) return lingering_close();
  do_read();
}

// After an answer that ends the connection (e.g. 413 before the body was read), closing at once
// with unread bytes makes the kernel send a reset, and the client may lose the answer. So: stop
// sending, discard what still arrives for a moment, then close.
void HttpSession::lingering_close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  discard_ = std::make_shared<std::array<char, 4096>>();
  discarded_bytes_ = 0;
  stream_.expires_after(std::chrono::seconds(2));
  discard_more();
}

void HttpSession::discard_more() {
  stream_.async_read_some(net::buffer(*discard_), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->discarded_bytes_ += n;
    constexpr size_t kMaxDiscard = 64ull << 20;
    if (ec || self->discarded_bytes_ > kMaxDiscard) return self->close();
    self->discard_more();
  });
}

void HttpSession::start_generation(GenerationPlan plan) {
  gen_ = std::make_unique<Generation>(std::move(plan));
  ++gen_serial_;
  Generation& g = *gen_;
  if (Status s = submit_ready(); !s.ok()) {
    if (!g.any_submitted()) return send_reply(ApiHandler::error_reply(api_error_from_status(s)), keep_alive_);
    fail_submission(s);
  }
  hold_.expires_at(net::steady_timer::time_point::max());
  hold_.async_wait([self = shared_from_this()](beast::error_code) {});
  stream_.expires_never();  // the wait for the engine is bounded by the request deadline instead

  if (g.plan.response.stream) {
    g.chunked = http_version_ >= 11;
    if (!g.chunked) keep_alive_ = false;
    std::string cors_head;  // values are checked origins and fixed text: no CR/LF can get in
    for (const auto& [name, value] : cors_headers_) cors_head += name + ": " + value + "\r\n";
    g.header = fmt::format(
        "HTTP/1.{} 200 OK\r\nServer: horizon\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "X-Request-Id: {}\r\n{}{}{}\r\n",
        http_version_ >= 11 ? 1 : 0, g.plan.response.id, g.chunked ? "Transfer-Encoding: chunked\r\n" : "",
        keep_alive_ ? "" : "Connection: close\r\n", cors_head);
    for (auto& c : g.choices) g.pending += c->assembler.stream_start();
    flush_stream();
  }
  watch_disconnect();
}

Status HttpSession::submit_choice(size_t i) {
  Generation& g = *gen_;
  Generation::Choice& c = *g.choices[i];
  std::weak_ptr<HttpSession> weak = weak_from_this();
  std::shared_ptr<PostGate> gate = ctx_.gate;
  // Runs on the engine thread: post to this session's strand, unless the server is gone.
  c.channel = std::make_shared<EventChannel>([weak, gate] {
    std::lock_guard<std::mutex> lock(gate->mu);
    if (!gate->open) return;
    if (auto self = weak.lock()) {
      net::post(self->stream_.get_executor(), [self] { self->on_events(); });
    }
  });
  GenerationRequest request;
  request.prompt = g.plan.prompts[static_cast<size_t>(g.plan.choices[i].prompt)];
  request.sampling = g.plan.choices[i].sampling;
  request.prompt_logprobs = g.plan.response.echo_prompt && g.plan.response.logprobs;
  request.sink = std::make_shared<ChannelSink>(c.channel);
  if (ctx_.options->request_timeout.count() > 0) request.deadline = request_start_ + ctx_.options->request_timeout;
  if (ctx_.options->first_token_timeout.count() > 0)
    request.first_token_deadline = request_start_ + ctx_.options->first_token_timeout;
  auto id = ctx_.engine->submit(std::move(request));
  if (!id.ok()) return id.status();
  c.engine_id = *id;
  c.submitted = true;
  return Status();
}

// Every choice whose turn has come: a prompt's first choice at once, the others once it has its
// first token (or has ended), so that with prefix caching they find its blocks instead of
// prefilling the same prompt side by side. After a failure (or with the client gone) the choices
// not submitted are given up. A full engine queue while some of the request's choices run is not
// a failure: the rest go in as those make progress (this is called again with their events), so a
// batch larger than the queue still runs. Stops at the first choice that cannot be queued.
Status HttpSession::submit_ready() {
  Generation& g = *gen_;
  for (size_t i = 0; i < g.choices.size(); ++i) {
    Generation::Choice& c = *g.choices[i];
    if (c.submitted || c.finished) continue;
    if (g.client_gone || g.failed()) {
      c.finished = true;  // never submitted
      continue;
    }
    const Generation::Choice& leader = *g.choices[c.leader];
    if (c.leader != i && !leader.finished && !leader.last_event) continue;
    if (Status s = submit_choice(i); !s.ok()) {
      if (s.code() == StatusCode::kResourceExhausted && g.any_running()) return Status();
      return s;
    }
  }
  return Status();
}

// A choice could not be queued after others were: the request fails (the choices running are
// cancelled), with the error as the answer or, once a stream has started, as its error event.
void HttpSession::fail_submission(const Status& s) {
  Generation& g = *gen_;
  if (g.plan.response.stream) {
    GenerationEvent e;
    e.kind = GenerationEvent::Kind::kFinished;
    e.finish_reason = FinishReason::kError;
    e.error = s;
    g.failure = e;
  } else {
    g.submit_error = api_error_from_status(s);
  }
  cancel_choices();
  for (auto& c : g.choices) {
    if (!c->submitted) c->finished = true;
  }
}

void HttpSession::cancel_choices() {
  for (auto& c : gen_->choices) {
    if (c->submitted && !c->finished) ctx_.engine->cancel(c->engine_id);
  }
}

// Waits for the socket to turn readable while a generation runs: EOF or an error there means the
// client went away, which must cancel the request now rather than when a write finally fails.
void HttpSession::watch_disconnect() {
  uint64_t serial = gen_serial_;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), serial](beast::error_code ec) {
    if (!self->gen_ || self->gen_serial_ != serial || self->gen_->finished) return;
    if (ec == net::error::operation_aborted) return;
    if (!ec) {
      char byte;
      beast::error_code peek_ec;
      auto& sock = self->stream_.socket();
      sock.non_blocking(true, peek_ec);
      size_t n = sock.receive(net::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
      if (peek_ec == net::error::would_block || peek_ec == net::error::try_again) return self->watch_disconnect();
      if (!peek_ec && n > 0) return;  // a pipelined request: the client is there; read it later
    }
    self->on_client_gone("client disconnected");
  });
}

void HttpSession::on_client_gone(const char* why) {
  if (!gen_ || gen_->client_gone) return;
  gen_->client_gone = true;
  if (!gen_->finished) {
    HZ_LOG_DEBUG("{}: {}, cancelling its engine requests", gen_->plan.response.id, why);
    cancel_choices();
  }
  // A stream writing right now ends in its write handler; otherwise wait for kFinished, so the
  // request's final accounting happens once the engine has let go of it.
}

void HttpSession::on_events() {
  if (!gen_ || gen_->choices.front()->channel == nullptr) return;
  Generation& g = *gen_;
  const bool stream = g.plan.response.stream;
  for (auto& cp : g.choices) {
    Generation::Choice& c = *cp;
    if (c.channel == nullptr) continue;
    for (auto& [arrival, e] : c.channel->take()) {
      if (c.finished) break;
      if (e.kind == GenerationEvent::Kind::kTokens) {
        uint64_t n = e.token_ids.size();
        if (n > 0) {
          if (!g.first_token) {
            g.first_token = arrival;
            ctx_.metrics->observe_ttft(std::chrono::duration<double>(arrival - request_start_).count());
          }
          if (!c.last_event) {
            if (n > 1) ctx_.metrics->observe_inter_token(0.0, n - 1);
          } else {
            double gap = std::chrono::duration<double>(arrival - *c.last_event).count();
            ctx_.metrics->observe_inter_token(gap / static_cast<double>(n), n);
          }
          g.tokens_seen += n;
          c.last_event = arrival;
        }
        if (g.client_gone || g.failed()) continue;
        if (stream) {
          g.pending += c.assembler.stream_tokens(e);
        } else {
          c.assembler.add_tokens(e);
        }
      } else {
        c.finished = true;
        c.final_event = std::move(e);
        if (finish_error(c.final_event)) {
          if (!g.failed()) {
            g.failure = c.final_event;
            cancel_choices();  // one failed choice fails the request
          }
        } else if (stream && !g.client_gone && !g.failed()) {
          g.pending += c.assembler.stream_finish_choice(c.final_event);
        }
      }
    }
  }
  if (Status s = submit_ready(); !s.ok()) fail_submission(s);
  if (!g.finished && g.all_finished()) {
    g.finished = true;
    g.final_event = g.outcome();
    ctx_.metrics->on_request_finished(g.final_event, std::chrono::duration<double>(Clock::now() - request_start_).count());
  }
  if (g.client_gone) {
    // Nothing more goes to this client; once the engine is done with the request, account and close.
    if (g.finished && !g.writing) {
      complete_request(499);  // nginx's "client closed request"
      close();
    }
    return;
  }
  if (stream) {
    if (g.finished && !g.terminated) {
      // A failure's error event, or the usage (summed over the choices) and [DONE].
      int32_t reasoning_tokens = 0;
      for (const auto& c : g.choices) reasoning_tokens += c->assembler.reasoning_tokens();
      g.pending += finish_error(g.final_event) ? g.first().stream_finish(g.final_event)
                                               : g.first().stream_end(g.final_event, reasoning_tokens);
      g.terminated = true;
    }
    return flush_stream();
  }
  if (g.finished && !g.replied) finish_generation_reply();
}

void HttpSession::finish_generation_reply() {
  Generation& g = *gen_;
  g.replied = true;
  if (g.submit_error) return send_reply(ApiHandler::error_reply(*g.submit_error), keep_alive_);
  if (auto err = finish_error(g.final_event)) return send_reply(ApiHandler::error_reply(*err), keep_alive_);
  std::vector<const CompletionAssembler*> parts;
  std::vector<const GenerationEvent*> events;
  for (const auto& c : g.choices) {
    parts.push_back(&c->assembler);
    events.push_back(&c->final_event);
  }
  HttpReply r;
  r.body = CompletionAssembler::merged_body(parts, events, g.final_event);
  send_reply(r, keep_alive_);
}

void HttpSession::flush_stream() {
  Generation& g = *gen_;
  if (g.writing) return;
  bool last = g.terminated && g.finished;
  if (g.pending.empty() && g.header.empty() && !last) return;
  g.write_buf.clear();
  g.write_buf.swap(g.header);
  if (!g.pending.empty()) {
    if (g.chunked) g.write_buf += fmt::format("{:x}\r\n", g.pending.size());
    g.write_buf += g.pending;
    if (g.chunked) g.write_buf += "\r\n";
    g.pending.clear();
  }
  if (last && g.chunked) g.write_buf += "0\r\n\r\n";
  if (last) g.terminated = true;
  g.writing = true;
  stream_.expires_after(ctx_.options->write_timeout);
  net::async_write(stream_, net::buffer(g.write_buf),
                   [self = shared_from_this(), last](beast::error_code ec, size_t) {
                     if (!self->gen_) return;
                     Generation& gen = *self->gen_;
                     gen.writing = false;
                     if (ec) self->on_client_gone("write failed");
                     if (gen.client_gone) {
                       // Once the engine has finished the request, account for it and drop the
                       // connection; until then kFinished (after the cancel) will do it.
                       if (gen.finished) {
                         self->complete_request(499);
                         self->close();
                       }
                       return;
                     }
                     if (last) return self->on_stream_written();
                     self->flush_stream();
                   });
}

void HttpSession::on_stream_written() {
  stream_.expires_never();
  complete_request(200);
  if (!keep_alive_) return close();
  do_read();
}

void HttpSession::complete_request(int status) {
  if (!request_active_) return;
  request_active_ = false;
  ctx_.metrics->on_http_status(status);
  double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - request_start_).count();
  if (gen_) {
    Generation& g = *gen_;
    double ttft_ms =
        g.first_token ? std::chrono::duration<double, std::milli>(*g.first_token - request_start_).count() : -1.0;
    if (ctx_.options->access_log) {
      size_t prompt_tokens = 0;
      for (const auto& p : g.plan.prompts) prompt_tokens += p.size();
      HZ_LOG_INFO("access id={} peer={} {} {} status={} prompt_tokens={} completion_tokens={} cached_tokens={} "
                  "finish={} ttft_ms={:.1f} total_ms={:.1f}",
                  g.plan.response.id, peer_, method_, path_, status, prompt_tokens, g.tokens_seen,
                  g.final_event.cached_tokens, g.finished ? finish_reason_name(g.final_event.finish_reason) : "-",
                  ttft_ms, total_ms);
    }
    // The engine failed it (a device error, a full KV cache, non-finite logits): the operator sees
    // why, whatever the client did with the message.
    if (g.finished && g.final_event.finish_reason == FinishReason::kError) {
      const Status& err = g.final_event.error;
      if (err.code() == StatusCode::kDeadlineExceeded) {  // --first-token-timeout: the operator's limit
        HZ_LOG_WARN("request {} failed: {}", g.plan.response.id, err.message());
      } else {
        HZ_LOG_ERROR("request {} failed: {}", g.plan.response.id, err.ok() ? "the engine failed it" : err.message());
      }
    }
    // The disconnect watcher has nothing left to watch; stop it before the next read.
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    hold_.cancel();
    gen_.reset();
  } else if (ctx_.options->access_log) {
    HZ_LOG_INFO("access id=- peer={} {} {} status={} total_ms={:.1f}", peer_, method_, path_, status, total_ms);
  }
  ctx_.active_requests->fetch_sub(1);
}

void HttpSession::close() {
  if (gen_ && !gen_->finished) cancel_choices();
  if (request_active_) complete_request(499);
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

}  // namespace hz
