// Routing and the transport-free half of each endpoint: auth, /health, /ready, /metrics, /v1/models,
// and for completions the parse -> validate -> render -> tokenize -> limits pipeline that ends in a
// GenerationPlan. HttpSession does the I/O and the engine round trip. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "chat/reasoning.h"
#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/cors.h"
#include "server/grammar_constraint.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/rate_limit.h"
#include "server/server_options.h"

namespace hz {

struct HttpRequestInfo {
  std::string_view method;  // "GET", "POST", ...
  std::string_view target;  // path, maybe with a query
  std::string_view authorization;
  std::string_view x_api_key;      // Anthropic clients send the key here
  std::string_view if_none_match;  // web pages: revalidation
  std::string_view origin;         // CORS: Origin, Access-Control-Request-Method/-Headers
  std::string_view cors_method;
  std::string_view cors_headers;
  std::string_view body;
  std::string_view peer_address;   // the client's IP address (rate limits without API keys)
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// A validated generation, ready for Engine::submit.
struct GenerationPlan {
  ParsedRequest request;
  // Token ids, BOS included when the model wants it: the prompt, or each prompt of a batch.
  std::vector<std::vector<int32_t>> prompts;
  // With `echo`: the text each prompt's choices start with (the request's text, or its token ids decoded).
  std::vector<std::string> echo_texts;
  ResponseContext response;
  struct Choice {
    int32_t prompt = 0;  // index into prompts
    SamplingParams sampling;
  };
  // One per choice, each submitted as a request of its own: prompt p's `n` choices at p * n + i.
  // Choice i of a prompt samples with seed + i when a seed was given (so a batch's prompt is
  // answered as if sent alone), and each has its own grammar mask (a mask follows one sequence).
  std::vector<Choice> choices;
};

// The model name requests and metrics carry: --served-model-name, else the engine's name, else the
// file's stem.
std::string served_model_name(const Engine& engine, const ServerOptions& options);

class ApiHandler {
 public:
  ApiHandler(Engine& engine, const ServerOptions& options, ServerMetrics& metrics);

  // Either the reply to send now, or the generation to run. Errors of /v1/messages come in
  // Anthropic's shape ({"type": "error", "error": {"type", "message"}}), others in OpenAI's.
  std::variant<HttpReply, GenerationPlan> handle(const HttpRequestInfo& request);

  static HttpReply error_reply(const ApiError& e);

 private:
  std::variant<HttpReply, GenerationPlan> route(const HttpRequestInfo& request);

 public:
  // The name responses carry: --served-model-name, else the engine's model name.
  const std::string& served_model_name() const { return served_model_name_; }
  // Whether a request's `model` names this server's model: the served name, or, without
  // --served-model-name, the model's path or file name as vLLM and llama-server users write it.
  // An omitted (empty) model is accepted, as vLLM and llama-server do.
  bool serves_model(std::string_view requested) const;
  const CorsPolicy& cors() const { return cors_; }
  // Once set, /ready answers 503 (the server stops accepting before the engine starts draining).
  void set_shutting_down() { shutting_down_.store(true); }

 private:
  // The 429 of a client over --rate-limit, with Retry-After and OpenAI's x-ratelimit-* headers.
  HttpReply rate_limited(const RateLimiter::Decision& d);
  ApiError model_not_found(std::string_view requested) const;
  HttpReply ready() const;
  nlohmann::json model_object() const;  // one entry of /v1/models
  HttpReply models() const;
  HttpReply tokenize(std::string_view body) const;
  HttpReply detokenize(std::string_view body) const;
  HttpReply embeddings(std::string_view body);
  std::variant<HttpReply, GenerationPlan> generation(ApiKind kind, std::string_view body);
  std::string new_id(ApiKind kind);

  Engine& engine_;
  const ServerOptions& options_;
  ServerMetrics& metrics_;
  RateLimiter limiter_;
  CorsPolicy cors_;
  std::string served_model_name_;
  std::vector<std::string> model_names_;  // what `model` may say (serves_model)
  ModelInfo chat_model_;  // the engine's model info with --chat-template applied
  std::optional<ReasoningTags> reasoning_tags_;  // chat replies' reasoning is split with these
  std::atomic<bool> shutting_down_{false};
  std::mutex id_mu_;
  std::mt19937_64 id_rng_;
  GrammarCache grammars_;
};

}  // namespace hz
