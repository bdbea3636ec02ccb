#include "server/api_handler.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "server/auth.h"
#include "server/chat_prompt.h"
#include "server/status_json.h"
#include "server/web_assets.h"

namespace hz {
namespace {

using nlohmann::json;

HttpReply json_reply(int status, const json& j) {
  HttpReply r;
  r.status = status;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ApiHandler::ApiHandler(Engine& engine, const ServerOptions& options, ServerMetrics& metrics)
    : engine_(engine), options_(options), metrics_(metrics), id_rng_(std::random_device{}()) {
  served_model_name_ = options.served_model_name;
  if (served_model_name_.empty()) served_model_name_ = engine.model_info().name;
  if (served_model_name_.empty()) served_model_name_ = std::filesystem::path(engine.model_info().path).stem().string();
  if (served_model_name_.empty()) served_model_name_ = "horizon";
}

HttpReply ApiHandler::error_reply(const ApiError& e) {
  HttpReply r;
  r.status = e.http_status;
  r.body = api_error_body(e);
  r.headers = e.headers;
  return r;
}

std::string ApiHandler::new_id(ApiKind kind) {
  std::lock_guard<std::mutex> lock(id_mu_);
  return fmt::format("{}-{:016x}{:08x}", kind == ApiKind::kChat ? "chatcmpl" : "cmpl", id_rng_(),
                     static_cast<uint32_t>(id_rng_()));
}

std::variant<HttpReply, GenerationPlan> ApiHandler::handle(const HttpRequestInfo& req) {
  std::string_view path = req.target.substr(0, req.target.find('?'));
  auto method_not_allowed = [](const char* allow) {
    ApiError e;
    e.http_status = 405;
    e.message = fmt::format("method not allowed; use {}", allow);
    e.headers.emplace_back("Allow", allow);
    return error_reply(e);
  };
  bool get = req.method == "GET";
  bool post = req.method == "POST";

  if (path == "/health") return get ? json_reply(200, {{"status", "ok"}}) : method_not_allowed("GET");
  if (path == "/ready") return get ? ready() : method_not_allowed("GET");
  if (path == "/metrics") {
    if (!get) return method_not_allowed("GET");
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.render(engine_.stats());
    return r;
  }
  bool is_v1 = path == "/v1" || path.substr(0, 4) == "/v1/";
  if (is_v1 && !is_authorized(req.authorization, options_.api_key)) {
    ApiError e;
    e.http_status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    e.message = req.authorization.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                          : "invalid API key";
    e.headers.emplace_back("WWW-Authenticate", "Bearer");
    return error_reply(e);
  }
  if (path == "/v1/models") return get ? models() : method_not_allowed("GET");
  if (path == "/v1/status") {
    if (!get) return method_not_allowed("GET");
    HttpReply r;
    r.body = status_json(engine_.stats(), metrics_, served_model_name_);
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
  }
  if (path == "/v1/completions") {
    return post ? generation(ApiKind::kCompletion, req.body) : method_not_allowed("POST");
  }
  if (path == "/v1/chat/completions") return post ? generation(ApiKind::kChat, req.body) : method_not_allowed("POST");
  if (auto page = web_file_reply(req.method, path, req.if_none_match)) return std::move(*page);
  ApiError e;
  e.http_status = 404;
  e.type = "not_found_error";
  e.message = fmt::format("no such endpoint: {} (this server has /v1/completions, /v1/chat/completions, "
                          "/v1/models, /health, /ready, /metrics)",
                          std::string(path.substr(0, 200)));
  return error_reply(e);
}

HttpReply ApiHandler::ready() const {
  auto not_ready = [](const std::string& reason) {
    return json_reply(503, {{"status", "not ready"}, {"reason", reason}});
  };
  if (shutting_down_.load()) return not_ready("the server is shutting down");
  EngineStats s = engine_.stats();
  if (s.draining) return not_ready("the engine is draining for shutdown");
  auto stalled = std::chrono::steady_clock::now() - s.last_progress;
  if (stalled > options_.ready_stall) {
    return not_ready(fmt::format("the engine loop has made no progress for {} ms",
                                 std::chrono::duration_cast<std::chrono::milliseconds>(stalled).count()));
  }
  if (s.max_queue > 0 && s.waiting >= s.max_queue) {
    return not_ready(fmt::format("the waiting queue is full ({} of {})", s.waiting, s.max_queue));
  }
  return json_reply(200, {{"status", "ready"}});
}

HttpReply ApiHandler::models() const {
  const ModelInfo& info = engine_.model_info();
  json model = {{"id", served_model_name_},
                {"object", "model"},
                {"created", info.created_unix},
                {"owned_by", "horizon"},
                {"max_model_len", info.max_model_len}};
  return json_reply(200, {{"object", "list"}, {"data", json::array({model})}});
}

std::variant<HttpReply, GenerationPlan> ApiHandler::generation(ApiKind kind, std::string_view body) {
  GenerationPlan plan;
  ParseOptions parse_options;
  parse_options.normalize_newlines = options_.normalize_newlines;
  if (auto e = parse_request(kind, body, parse_options, &plan.request)) return error_reply(*e);
  const ParsedRequest& r = plan.request;
  const ModelInfo& info = engine_.model_info();
  const char* prompt_field = kind == ApiKind::kChat ? "messages" : "prompt";

  if (kind == ApiKind::kChat) {
    auto text = render_chat_prompt(info, r.messages);
    if (!text.ok()) return error_reply(bad_request(text.status().message(), "messages"));
    plan.prompt = engine_.tokenize(*text, /*add_special=*/true, /*parse_special=*/true);
  } else if (r.prompt_is_tokens) {
    for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
      if (info.vocab_size > 0 && r.prompt_tokens[i] >= info.vocab_size) {
        return error_reply(bad_request(fmt::format("'prompt[{}]' = {} is not a token id (the vocabulary has {})", i,
                                                   r.prompt_tokens[i], info.vocab_size),
                                       "prompt"));
      }
    }
    plan.prompt = r.prompt_tokens;
  } else {
    plan.prompt = engine_.tokenize(r.prompt_text, /*add_special=*/true, /*parse_special=*/true);
  }
  if (plan.prompt.empty()) return error_reply(bad_request(fmt::format("'{}' is empty", prompt_field), prompt_field));

  // Only output is ever cut: the prompt must leave room for at least one token.
  int64_t num_prompt = static_cast<int64_t>(plan.prompt.size());
  int64_t max_len = info.max_model_len;
  if (max_len > 0 && num_prompt >= max_len) {
    ApiError e = bad_request(fmt::format("this model's maximum context length is {} tokens, but the prompt has {} "
                                         "tokens (no room left for output)",
                                         max_len, num_prompt),
                             prompt_field);
    e.code = "context_length_exceeded";
    return error_reply(e);
  }
  SamplingParams& s = plan.request.sampling;
  if (!r.max_tokens_set) {
    // OpenAI's defaults: completions 16 tokens, chat "until done" (the rest of the context).
    constexpr int32_t kChatDefaultWithoutLimit = 1024;
    s.max_tokens = kind == ApiKind::kCompletion ? 16
                   : max_len > 0                ? static_cast<int32_t>(max_len - num_prompt)
                                                : kChatDefaultWithoutLimit;
  }
  if (max_len > 0 && s.max_tokens > max_len - num_prompt) s.max_tokens = static_cast<int32_t>(max_len - num_prompt);

  plan.response.kind = kind;
  plan.response.id = new_id(kind);
  plan.response.created = unix_now();
  plan.response.model = served_model_name_;
  plan.response.stream = r.stream;
  plan.response.include_usage = r.stream && r.include_usage;
  plan.response.logprobs = s.logprobs;
  plan.response.top_logprobs = s.top_logprobs;
  return plan;
}

}  // namespace hz
