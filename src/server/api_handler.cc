#include "server/api_handler.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <optional>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/version.h"
#include "server/auth.h"
#include "server/anthropic.h"
#include "server/responses_api.h"
#include "server/chat_prompt.h"
#include "server/embeddings.h"
#include "chat/tool_call_parser.h"
#include "server/text_hygiene.h"
#include "tokenizer/tokenizer.h"
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

std::string served_model_name(const Engine& engine, const ServerOptions& options) {
  std::string name = options.served_model_name;
  if (name.empty()) name = engine.model_info().name;
  if (name.empty()) name = std::filesystem::path(engine.model_info().path).stem().string();
  if (name.empty()) name = "horizon";
  return name;
}

ApiHandler::ApiHandler(Engine& engine, const ServerOptions& options, ServerMetrics& metrics)
    : engine_(engine),
      options_(options),
      metrics_(metrics),
      limiter_(options.rate_limit_rpm),
      cors_(options.allowed_origins),
      id_rng_(std::random_device{}()) {
  served_model_name_ = hz::served_model_name(engine, options);
  model_names_.push_back(served_model_name_);
  if (options.served_model_name.empty()) {
    const std::filesystem::path path(engine.model_info().path);
    for (const std::string& name : {engine.model_info().name, path.string(), path.filename().string(), path.stem().string()}) {
      if (!name.empty()) model_names_.push_back(name);
    }
  }
  chat_model_ = engine.model_info();
  if (!options.chat_template.empty()) chat_model_.chat_template = options.chat_template;
  if (options.reasoning_parser == "auto") {
    reasoning_tags_ = detect_reasoning_tags(chat_model_.chat_template);
  } else if (options.reasoning_parser != "none") {
    reasoning_tags_ = reasoning_tags_by_name(options.reasoning_parser);
    HZ_CHECK(reasoning_tags_.has_value());  // the flag's values are checked when it is read
  }
}

ApiError ApiHandler::model_not_found(std::string_view requested) const {
  ApiError e;
  e.http_status = 404;
  e.code = "model_not_found";
  e.param = "model";
  e.message = fmt::format("The model `{}` does not exist (this server serves `{}`)",
                          std::string(requested.substr(0, 200)), served_model_name_);
  return e;
}

HttpReply ApiHandler::error_reply(const ApiError& e) {
  HttpReply r;
  r.status = e.http_status;
  r.body = api_error_body(e);
  r.headers = e.headers;
  return r;
}

bool ApiHandler::serves_model(std::string_view requested) const {
  if (requested.empty()) return true;
  for (const std::string& name : model_names_) {
    if (requested == name) return true;
  }
  return false;
}

std::string ApiHandler::new_id(ApiKind kind) {
  std::lock_guard<std::mutex> lock(id_mu_);
  return fmt::format("{}-{:016x}{:08x}", kind == ApiKind::kChat ? "chatcmpl" : "cmpl", id_rng_(),
                     static_cast<uint32_t>(id_rng_()));
}

HttpReply ApiHandler::rate_limited(const RateLimiter::Decision& d) {
  metrics_.on_rate_limited();
  const int64_t retry = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(d.retry_after_s)));
  ApiError e;
  e.http_status = 429;
  e.type = "requests";
  e.code = "rate_limit_exceeded";
  e.message = fmt::format("rate limit reached: {} requests per minute; try again in {} s", d.limit, retry);
  e.headers.emplace_back("Retry-After", std::to_string(retry));
  e.headers.emplace_back("x-ratelimit-limit-requests", std::to_string(d.limit));
  e.headers.emplace_back("x-ratelimit-remaining-requests", std::to_string(d.remaining));
  e.headers.emplace_back("x-ratelimit-reset-requests", fmt::format("{}s", static_cast<int64_t>(std::ceil(d.reset_s))));
  return error_reply(e);
}

namespace {

// An OpenAI-shaped error reply in Anthropic's shape, its type from the status as Anthropic names it.
void to_anthropic_error(HttpReply* r) {
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return;
  const char* type = "api_error";
  switch (r->status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default: break;
  }
  const std::string message = j["error"].value("message", std::string());
  r->body = json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}}.dump();
}

}  // namespace

std::variant<HttpReply, GenerationPlan> ApiHandler::handle(const HttpRequestInfo& req) {
  auto result = route(req);
  const std::string_view path = req.target.substr(0, req.target.find('?'));
  if (path == "/v1/messages") {
    if (auto* reply = std::get_if<HttpReply>(&result); reply != nullptr && reply->status >= 400) to_anthropic_error(reply);
  }
  return result;
}

std::variant<HttpReply, GenerationPlan> ApiHandler::route(const HttpRequestInfo& req) {
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
  // A browser's CORS preflight carries no credentials: it is answered before any auth check.
  if (req.method == "OPTIONS") {
    if (auto p = cors_.preflight(req.origin, req.cors_method, req.cors_headers)) {
      HttpReply r;
      r.status = p->status;
      r.headers = std::move(p->headers);
      if (p->status != 204) {
        ApiError e;
        e.http_status = p->status;
        e.type = "permission_error";
        e.message = p->error;
        r.body = api_error_body(e);
      } else {
        r.content_type = "text/plain";
      }
      return r;
    }
  }

  if (path == "/health") return get ? json_reply(200, {{"status", "ok"}}) : method_not_allowed("GET");
  if (path == "/ready") return get ? ready() : method_not_allowed("GET");
  if (path == "/version") return get ? json_reply(200, {{"version", horizon_version()}}) : method_not_allowed("GET");
  auto unauthorized = [&] {
    ApiError e;
    e.http_status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    e.message = req.authorization.empty() && req.x_api_key.empty()
                    ? "missing API key: send 'Authorization: Bearer <key>'"
                    : "invalid API key";
    e.headers.emplace_back("WWW-Authenticate", "Bearer");
    return error_reply(e);
  };
  // The key the request presents (its index), or -1; with no keys configured every request passes.
  const int key = options_.api_keys.empty() ? -1 : matching_key(req.authorization, req.x_api_key, options_.api_keys);
  const bool key_ok = options_.api_keys.empty() || key >= 0;
  if (path == "/metrics") {
    if (!get) return method_not_allowed("GET");
    if (options_.metrics_auth && !key_ok) return unauthorized();
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.render(engine_.stats());
    return r;
  }
  if (path == "/metrics.json") {  // the same figures as /metrics, for a status page (shape: server/metrics.h)
    if (!get) return method_not_allowed("GET");
    if (options_.metrics_auth && !key_ok) return unauthorized();
    HttpReply r;
    r.content_type = "application/json";
    r.body = metrics_.render_json(engine_.stats());
    return r;
  }
  bool is_v1 = path == "/v1" || path.substr(0, 4) == "/v1/";
  if (is_v1 && !key_ok) return unauthorized();
  if (path == "/v1/models") return get ? models() : method_not_allowed("GET");
  if (path.substr(0, 11) == "/v1/models/") {  // one model (the openai client's models.retrieve)
    if (!get) return method_not_allowed("GET");
    const std::string_view id = path.substr(11);
    if (!serves_model(id)) return error_reply(model_not_found(id));
    return json_reply(200, model_object());
  }
  if (path == "/props") {  // llama-server's: what its web page and clients read about the model
    if (!key_ok) return unauthorized();
    if (!get) return method_not_allowed("GET");
    const ModelInfo& info = engine_.model_info();
    return json_reply(200, {{"model_path", info.path},
                            {"model_alias", served_model_name_},
                            {"default_generation_settings",
                             {{"n_ctx", info.max_model_len},
                              {"params",
                               {{"temperature", options_.sampling_defaults.temperature},
                                {"top_p", options_.sampling_defaults.top_p},
                                {"top_k", options_.sampling_defaults.top_k},
                                {"min_p", options_.sampling_defaults.min_p},
                                {"repeat_penalty", options_.sampling_defaults.repetition_penalty}}}}},
                            {"chat_template", chat_model_.chat_template},
                            {"bos_token", info.bos_token},
                            {"eos_token", info.eos_token},
                            {"build_info", horizon_version()}});
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (!key_ok) return unauthorized();
    if (!post) return method_not_allowed("POST");
    return path == "/tokenize" ? tokenize(req.body) : detokenize(req.body);
  }
  if (path == "/v1/status") {
    if (!get) return method_not_allowed("GET");
    HttpReply r;
    r.body = status_json(engine_.stats(), metrics_, served_model_name_);
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
  }
  const bool generates = path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/embeddings" ||
                         path == "/v1/messages" || path == "/v1/responses";
  if (generates && post && limiter_.enabled()) {
    // Per key; a server without keys limits each client address.
    const std::string client = key >= 0 ? fmt::format("key {}", key) : std::string(req.peer_address);
    const RateLimiter::Decision d = limiter_.take(client);
    if (!d.allowed) return rate_limited(d);
  }
  if (path == "/v1/completions") {
    return post ? generation(ApiKind::kCompletion, req.body) : method_not_allowed("POST");
  }
  if (path == "/v1/chat/completions") return post ? generation(ApiKind::kChat, req.body) : method_not_allowed("POST");
  if (path == "/v1/embeddings") return post ? embeddings(req.body) : method_not_allowed("POST");
  if (path == "/v1/messages") {  // Anthropic's Messages API, through the chat pipeline
    if (!post) return method_not_allowed("POST");
    std::string chat_body;
    if (auto e = anthropic_to_chat_body(req.body, &chat_body)) return error_reply(*e);
    auto result = generation(ApiKind::kChat, chat_body);
    if (auto* plan = std::get_if<GenerationPlan>(&result)) {
      plan->response.shape = ReplyShape::kAnthropic;
      plan->response.id = "msg_" + plan->response.id.substr(plan->response.id.find('-') + 1);
      plan->response.prompt_tokens = static_cast<int32_t>(plan->prompts.front().size());
    }
    return result;
  }
  if (path == "/v1/responses") {  // OpenAI's Responses API, through the chat pipeline
    if (!post) return method_not_allowed("POST");
    std::string chat_body, echo;
    if (auto e = responses_to_chat_body(req.body, &chat_body, &echo)) return error_reply(*e);
    auto result = generation(ApiKind::kChat, chat_body);
    if (auto* plan = std::get_if<GenerationPlan>(&result)) {
      plan->response.shape = ReplyShape::kResponses;
      plan->response.id = "resp_" + plan->response.id.substr(plan->response.id.find('-') + 1);
      plan->response.prompt_tokens = static_cast<int32_t>(plan->prompts.front().size());
      plan->response.echo = std::move(echo);
    }
    return result;
  }
  if (path.substr(0, 14) == "/v1/responses/") {
    ApiError e;
    e.http_status = 404;
    e.type = "invalid_request_error";
    e.message = "this server keeps no responses: they cannot be retrieved, listed or deleted";
    return error_reply(e);
  }
  if (auto page = web_file_reply(req.method, path, req.if_none_match)) return std::move(*page);
  ApiError e;
  e.http_status = 404;
  e.type = "not_found_error";
  e.message = fmt::format("no such endpoint: {} (this server has /v1/completions, /v1/chat/completions, "
                          "{}/v1/messages, /v1/responses, /v1/models, /v1/status, /tokenize, /detokenize, /props, "
                          "/health, /ready, /version, /metrics, /metrics.json, / and /status)",
                          std::string(path.substr(0, 200)), options_.embeddings ? "/v1/embeddings, " : "");
  return error_reply(e);
}

// llama-server's shapes: {"content", "add_special", "with_pieces"} -> {"tokens": [id | {id, piece}]}.
HttpReply ApiHandler::tokenize(std::string_view body) const {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error_reply(bad_request("the request body must be a JSON object"));
  auto content = j.find("content");
  if (content == j.end() || !content->is_string()) return error_reply(bad_request("'content' must be a string", "content"));
  bool flags[2] = {false, false};
  const char* names[2] = {"add_special", "with_pieces"};
  for (int i = 0; i < 2; ++i) {
    auto it = j.find(names[i]);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_boolean()) return error_reply(bad_request(fmt::format("'{}' must be a boolean", names[i]), names[i]));
    flags[i] = it->get<bool>();
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "content" && key != "add_special" && key != "with_pieces" && key != "model")
      return error_reply(bad_request(fmt::format("unrecognized argument '{}'", key.substr(0, 64)), key.substr(0, 64)));
  }
  const std::vector<int32_t> ids = engine_.tokenize(content->get<std::string>(), flags[0], /*parse_special=*/true);
  json tokens = json::array();
  const Tokenizer* tok = engine_.get_tokenizer();
  for (int32_t id : ids) {
    if (!flags[1]) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tok != nullptr ? tok->token_to_piece(id, /*special=*/true) : engine_.detokenize({id});
    json p = piece;
    if (!is_valid_utf8(piece)) {  // part of a character: the bytes, as llama-server sends them
      p = json::array();
      for (unsigned char c : piece) p.push_back(c);
    }
    tokens.push_back({{"id", id}, {"piece", p}});
  }
  return json_reply(200, {{"tokens", tokens}});
}

HttpReply ApiHandler::detokenize(std::string_view body) const {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error_reply(bad_request("the request body must be a JSON object"));
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_array()) return error_reply(bad_request("'tokens' must be an array of token ids", "tokens"));
  const int32_t vocab = engine_.model_info().vocab_size;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& t = (*tokens)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || (vocab > 0 && t.get<int64_t>() >= vocab)) {
      return error_reply(bad_request(fmt::format("'tokens[{}]' is not a token id of this model", i), fmt::format("tokens[{}]", i)));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return json_reply(200, {{"content", engine_.detokenize(ids)}});
}

// NOTE: the request thread waits for the engine's answer (a future, bounded by the request
// timeout) rather than streaming events: an embedding is one forward pass per input and its
// answer is a single body. The engine still runs it on its own thread, between steps.
HttpReply ApiHandler::embeddings(std::string_view body) {
  if (!options_.embeddings) {
    ApiError e;
    e.http_status = 501;
    e.type = "not_supported_error";
    e.message = "this server does not serve embeddings: start it with --embeddings";
    return error_reply(e);
  }
  EmbeddingsRequest r;
  if (auto e = parse_embeddings_request(body, &r)) return error_reply(*e);
  if (!serves_model(r.model)) return error_reply(model_not_found(r.model));
  const ModelInfo& info = engine_.model_info();
  EmbeddingJob job;
  job.pooling = options_.pooling == "last" ? Pooling::kLast : Pooling::kMean;
  job.inputs = std::move(r.token_inputs);
  for (size_t i = 0; i < job.inputs.size(); ++i) {
    for (int32_t t : job.inputs[i]) {
      if (info.vocab_size > 0 && t >= info.vocab_size)
        return error_reply(bad_request(fmt::format("'input[{}]' has token id {}, not in the vocabulary", i, t), "input"));
    }
  }
  for (const std::string& text : r.texts) {
    // Text is text: special-token spellings in it are not parsed (as for chat messages).
    job.inputs.push_back(engine_.tokenize(text, /*add_special=*/true, /*parse_special=*/false));
  }
  int64_t num_tokens = 0;
  for (size_t i = 0; i < job.inputs.size(); ++i) {
    num_tokens += static_cast<int64_t>(job.inputs[i].size());
    if (info.max_model_len > 0 && static_cast<int64_t>(job.inputs[i].size()) > info.max_model_len) {
      ApiError e = bad_request(fmt::format("'input[{}]' has {} tokens, more than this model's maximum context length "
                                           "of {}", i, job.inputs[i].size(), info.max_model_len),
                               "input");
      e.code = "context_length_exceeded";
      return error_reply(e);
    }
  }
  auto promise = std::make_shared<std::promise<Result<std::vector<std::vector<float>>>>>();
  auto future = promise->get_future();
  job.done = [promise](Result<std::vector<std::vector<float>>> v) { promise->set_value(std::move(v)); };
  if (Status s = engine_.submit_embeddings(std::move(job)); !s.ok()) {
    if (s.code() == StatusCode::kUnimplemented) {
      ApiError e;
      e.http_status = 501;
      e.type = "not_supported_error";
      e.message = s.message();
      return error_reply(e);
    }
    return error_reply(api_error_from_status(s));
  }
  const auto timeout = options_.request_timeout.count() > 0 ? options_.request_timeout : std::chrono::milliseconds(600'000);
  if (future.wait_for(timeout) != std::future_status::ready) {
    ApiError e;
    e.http_status = 504;
    e.type = "server_error";
    e.message = "the embeddings did not finish within the request timeout";
    return error_reply(e);
  }
  auto vectors = future.get();
  if (!vectors.ok()) return error_reply(api_error_from_status(vectors.status()));
  HttpReply reply;
  reply.body = embeddings_body(*vectors, r.base64, served_model_name_, num_tokens);
  return reply;
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

nlohmann::json ApiHandler::model_object() const {
  const ModelInfo& info = engine_.model_info();
  return {{"id", served_model_name_},
          {"object", "model"},
          {"created", info.created_unix},
          {"owned_by", "horizon"},
          {"max_model_len", info.max_model_len}};
}

HttpReply ApiHandler::models() const { return json_reply(200, {{"object", "list"}, {"data", json::array({model_object()})}}); }

std::variant<HttpReply, GenerationPlan> ApiHandler::generation(ApiKind kind, std::string_view body) {
  GenerationPlan plan;
  ParseOptions parse_options;
  parse_options.normalize_newlines = options_.normalize_newlines;
  parse_options.sampling = options_.sampling_defaults;
  if (auto e = parse_request(kind, body, parse_options, &plan.request)) return error_reply(*e);
  const ParsedRequest& r = plan.request;
  if (!serves_model(r.model)) return error_reply(model_not_found(r.model));
  const ModelInfo& info = engine_.model_info();
  const char* prompt_field = kind == ApiKind::kChat ? "messages" : "prompt";
  // How errors name prompt p: `prompt` (or `messages`) alone, `prompt[p]` in a batch; and in a message.
  const auto field_of = [&](size_t p) {
    return r.prompts.size() > 1 ? fmt::format("prompt[{}]", p) : std::string(prompt_field);
  };
  const auto subject = [](const std::string& field) {
    return field == "messages" ? std::string("the prompt") : "'" + field + "'";
  };
  // A text that cannot fit even at the longest token's bytes per token is refused before it is
  // tokenized (megabytes of prompt cost about a second of tokenizer time).
  auto too_long = [&](std::string_view text, const std::string& field) -> std::optional<HttpReply> {
    const int64_t max_bytes = int64_t{info.max_model_len} * info.max_token_bytes;
    if (info.max_model_len <= 0 || info.max_token_bytes <= 0 || static_cast<int64_t>(text.size()) <= max_bytes)
      return std::nullopt;
    ApiError e = bad_request(fmt::format("this model's maximum context length is {} tokens, but {} has {} "
                                         "bytes, more than {} tokens can hold",
                                         info.max_model_len, subject(field), text.size(), info.max_model_len),
                             field);
    e.code = "context_length_exceeded";
    return error_reply(e);
  };

  bool reasoning_may_open = false;  // chat: the reply may begin with the open tag
  if (kind == ApiKind::kChat) {
    ToolSetup tool_setup;
    if (r.tools.active()) {
      auto setup = plan_tool_calls(r.tools, detect_tool_call_format(chat_model_.chat_template));
      if (!setup.ok()) return error_reply(bad_request(setup.status().message(), "tools"));
      tool_setup = std::move(setup).value();
      if (!tool_setup.grammar.empty()) {
        if (!r.grammar_text.empty()) {
          return error_reply(bad_request("'response_format' cannot be used when the reply must be a tool call "
                                         "(tool_choice required or a named function, or a chat template without "
                                         "tools, where calls are constrained JSON)",
                                         "response_format"));
        }
        plan.request.grammar_text = tool_setup.grammar;
        plan.request.grammar_field = "tools";
      }
    }
    plan.response.tool_format = tool_setup.format;
    plan.response.parallel_tool_calls = r.tools.parallel;
    auto chat = render_chat_prompt(chat_model_, r.messages, r.tools, tool_setup, r.template_kwargs);
    if (!chat.ok()) return error_reply(bad_request(chat.status().message(), "messages"));
    if (auto reply = too_long(chat->text, prompt_field)) return *reply;
    if (reasoning_tags_) {
      plan.response.reasoning = reasoning_tags_;
      plan.response.reasoning_inside = prompt_opens_reasoning(chat->text, *reasoning_tags_);
      // Thinking turned off writes an empty, closed block (Qwen3's enable_thinking false): no more.
      reasoning_may_open = !plan.response.reasoning_inside && !prompt_closes_reasoning(chat->text, *reasoning_tags_);
    }
    plan.prompts.push_back(options_.allow_special_in_content
                               ? engine_.tokenize(chat->text, chat->add_special, /*parse_special=*/true)
                               : engine_.tokenize_mixed(chat->text, chat->input, chat->add_special));
  } else {
    for (size_t p = 0; p < r.prompts.size(); ++p) {
      const CompletionPrompt& in = r.prompts[p];
      const std::string field = field_of(p);
      if (in.is_tokens) {
        for (size_t i = 0; i < in.tokens.size(); ++i) {
          if (info.vocab_size > 0 && in.tokens[i] >= info.vocab_size) {
            return error_reply(bad_request(fmt::format("'{}[{}]' = {} is not a token id (the vocabulary has {})", field,
                                                       i, in.tokens[i], info.vocab_size),
                                           field));
          }
        }
        plan.prompts.push_back(in.tokens);
        if (r.echo) plan.echo_texts.push_back(engine_.detokenize(in.tokens));
      } else {
        if (auto reply = too_long(in.text, field)) return *reply;
        plan.prompts.push_back(engine_.tokenize(in.text, /*add_special=*/true, /*parse_special=*/true));
        if (r.echo) plan.echo_texts.push_back(in.text);
      }
    }
  }

  // Only output is ever cut: each prompt must leave room for at least one token.
  const int64_t max_len = info.max_model_len;
  for (size_t p = 0; p < plan.prompts.size(); ++p) {
    const std::string field = field_of(p);
    const auto num_prompt = static_cast<int64_t>(plan.prompts[p].size());
    if (num_prompt == 0) return error_reply(bad_request(fmt::format("'{}' is empty", field), field));
    if (max_len > 0 && num_prompt >= max_len) {
      ApiError e = bad_request(fmt::format("this model's maximum context length is {} tokens, but {} has {} "
                                           "tokens (no room left for output)",
                                           max_len, subject(field), num_prompt),
                               field);
      e.code = "context_length_exceeded";
      return error_reply(e);
    }
  }
  SamplingParams& s = plan.request.sampling;
  for (const auto& [id, bias] : s.logit_bias) {
    if (info.vocab_size > 0 && id >= info.vocab_size) {
      return error_reply(bad_request(fmt::format("'logit_bias' key {} is not a token id (the vocabulary has {})", id,
                                                 info.vocab_size),
                                     "logit_bias"));
    }
  }
  std::shared_ptr<const grammar::TokenGrammar> grammar;
  if (!r.grammar_text.empty()) {
    const Tokenizer* tok = engine_.get_tokenizer();
    if (tok == nullptr) {
      return error_reply(bad_request("constrained output is not available with this engine", r.grammar_field));
    }
    auto g = grammars_.get(r.grammar_text, *tok);
    if (!g.ok()) return error_reply(bad_request(g.status().message(), r.grammar_field));
    grammar = std::move(g).value();
  }
  // The open tag as one token of the vocabulary (Qwen3's <think>), which a constrained reply may begin with.
  int32_t reasoning_open_token = -1;
  if (grammar && plan.response.reasoning && reasoning_may_open) {
    const std::vector<int32_t> ids = engine_.tokenize(plan.response.reasoning->open, /*add_special=*/false,
                                                      /*parse_special=*/true);
    if (ids.size() == 1) reasoning_open_token = ids[0];
  }
  // A reasoning budget: the request's, else the server's; only where the reply may reason.
  ReasoningBudget budget;
  const int32_t budget_tokens = r.thinking_token_budget.value_or(options_.reasoning_budget);
  if (plan.response.reasoning && budget_tokens >= 0 && (plan.response.reasoning_inside || reasoning_may_open)) {
    // Written after generated tokens: no SentencePiece space prefix.
    const Tokenizer* tok = engine_.get_tokenizer();
    budget = make_reasoning_budget(budget_tokens, options_.reasoning_budget_message, plan.response.reasoning->close,
                                   [this, tok](const std::string& text) {
                                     return tok != nullptr ? tok->encode_continuation(text, /*parse_special=*/true)
                                                           : engine_.tokenize(text, false, /*parse_special=*/true);
                                   });
  }
  // A token's text as the reply shows it; the engine (and its tokenizer) outlives the request.
  std::function<std::string(int32_t)> piece;
  if (const Tokenizer* tok = engine_.get_tokenizer()) {
    piece = [tok](int32_t id) { return tok->token_to_piece(id, /*special=*/true); };
  } else {
    piece = [engine = &engine_](int32_t id) { return engine->detokenize({id}); };
  }
  for (size_t p = 0; p < plan.prompts.size(); ++p) {
    const auto num_prompt = static_cast<int64_t>(plan.prompts[p].size());
    SamplingParams ps = s;
    if (!r.max_tokens_set) {
      // OpenAI's defaults: completions 16 tokens, chat "until done" (the rest of the context).
      constexpr int32_t kChatDefaultWithoutLimit = 1024;
      ps.max_tokens = kind == ApiKind::kCompletion ? 16
                      : max_len > 0                ? static_cast<int32_t>(max_len - num_prompt)
                                                   : kChatDefaultWithoutLimit;
    }
    if (max_len > 0 && ps.max_tokens > max_len - num_prompt) ps.max_tokens = static_cast<int32_t>(max_len - num_prompt);
    for (int32_t i = 0; i < r.n; ++i) {
      GenerationPlan::Choice c{static_cast<int32_t>(p), ps};
      if (ps.seed) c.sampling.seed = *ps.seed + static_cast<uint64_t>(i);
      if (grammar) c.sampling.logit_mask = std::make_shared<GrammarLogitMask>(grammar);
      const bool may_reason = plan.response.reasoning && (plan.response.reasoning_inside ||
                                                          (grammar ? reasoning_open_token >= 0 : reasoning_may_open));
      if (may_reason && (grammar || budget.tokens >= 0)) {
        // A constraint starts with the answer; a budget ends the reasoning.
        c.sampling.logit_mask =
            std::make_shared<ReasoningMask>(std::move(c.sampling.logit_mask), *plan.response.reasoning, piece,
                                            plan.response.reasoning_inside, reasoning_open_token, budget);
      }
      plan.choices.push_back(std::move(c));
    }
  }
  plan.response.kind = kind;
  plan.response.id = new_id(kind);
  plan.response.created = unix_now();
  plan.response.model = served_model_name_;
  plan.response.stream = r.stream;
  plan.response.include_usage = r.stream && r.include_usage;
  plan.response.logprobs = s.logprobs;
  plan.response.echo_prompt = r.echo;
  plan.response.top_logprobs = s.top_logprobs;
  return plan;
}

}  // namespace hz
