// ServerOptions: everything the HTTP layer needs to know, listed once (tools/serve.cc maps flags here).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hz {

// What a request that leaves a sampling field out gets: OpenAI's defaults, or the model's own
// (vLLM's --generation-config auto: generation_config.json, which GGUF files carry as
// general.sampling.*).
struct SamplingDefaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;  // 0 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
};

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback by default: exposing the server is an explicit choice
  int port = 8080;                 // 0 = an ephemeral port (tests); HttpServer::port() tells which
  // None = no auth; else `Authorization: Bearer KEY` (or `x-api-key: KEY`) with one of them on /v1/*.
  std::vector<std::string> api_keys;
  bool metrics_auth = false;       // /metrics needs an API key too (when keys are set)
  // Generation requests per minute per API key (per client address without keys); 0 = no limit.
  // Over it: 429 with Retry-After.
  int32_t rate_limit_rpm = 0;
  // CORS: browser origins allowed to call the server ("*" = any); empty = CORS off (see cors.h).
  std::vector<std::string> allowed_origins;
  bool metrics_vllm_names = false; // /metrics also carries vLLM's names (--metrics-compat vllm)
  std::string served_model_name;   // empty = the engine's model name
  std::string chat_template;       // Jinja source for chat requests; empty = the model's (else ChatML)
  // Reasoning in chat replies (chat/reasoning.h): "auto" returns it as reasoning_content when the
  // chat template writes reasoning tags; "none" leaves it in content; a vLLM parser name
  // (deepseek_r1, qwen3, mistral, ...; "deepseek" = <think>) splits with that parser's tags.
  std::string reasoning_parser = "auto";
  // The most tokens a chat reply may reason before its close tag is forced, for requests that do
  // not send thinking_token_budget; -1 = no budget, 0 = none at all. The message (may be empty)
  // is written into the reasoning before the forced tag.
  int32_t reasoning_budget = -1;
  std::string reasoning_budget_message;
  SamplingDefaults sampling_defaults;
  int http_threads = 2;            // threads running the io_context (I/O only; the engine has its own)
  // Threads that parse, render and tokenize POST bodies off the I/O threads; 0 = on the I/O threads.
  int request_threads = 2;
  int max_pending_requests = 64;   // bodies queued or in work for those threads; more -> 503

  // Limits. A request over max_body_bytes gets 413, headers over max_header_bytes get 431.
  uint64_t max_body_bytes = 4ull << 20;
  uint32_t max_header_bytes = 16 * 1024;
  std::chrono::milliseconds idle_timeout{60'000};     // reading one request (and keep-alive idle)
  std::chrono::milliseconds write_timeout{30'000};    // one write to a client that stopped reading
  std::chrono::milliseconds request_timeout{600'000}; // generation deadline per request; 0 = none
  // A request with no first token this long after it arrived (queue + prefill) fails with 504
  // instead of waiting on; 0 = none (request_timeout still bounds it).
  std::chrono::milliseconds first_token_timeout{0};
  std::chrono::milliseconds shutdown_grace{10'000};   // SIGTERM: running requests get this long
  // /ready turns 503 when the engine loop has shown no progress for this long.
  std::chrono::milliseconds ready_stall{10'000};

  bool normalize_newlines = false;  // CRLF -> LF in prompts and message contents
  // Chat message contents are tokenized as plain text (a "<|im_end|>" there cannot end a turn);
  // true parses special tokens in them too, as the template's own text.
  bool allow_special_in_content = false;
  bool access_log = true;
  // /v1/embeddings (off by default, as in llama-server): "mean" or "last" token pooling.
  bool embeddings = false;
  std::string pooling = "mean";
};

}  // namespace hz
