// The engine as the server sees it: submit generation requests, receive events, cancel, observe.
// Implementations own an engine thread (scheduler, KV cache and model live there, without locks);
// every method here is thread-safe and non-blocking, so HTTP threads may call it directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/text_range.h"
#include "runtime/engine_stats.h"

namespace hz {

// Restricts which tokens may come next (e.g. a grammar). One per request, used on the engine thread
// only: apply() before each sampling step, accept() with the token sampled.
class LogitMask {
 public:
  virtual ~LogitMask() = default;
  // Sets the logits of disallowed tokens to -infinity. `logits` has `vocab` entries.
  virtual void apply(float* logits, int32_t vocab) = 0;
  virtual void accept(int32_t token) = 0;
};

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off (llama.cpp/vLLM style: divides positive logits)
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;     // none: a random seed per request
  int32_t max_tokens = 16;          // generated tokens at most; the output is cut there (finish: length).
                                    // 0 only with GenerationRequest::prompt_logprobs (scoring a prompt)
  std::vector<std::string> stop;    // stop strings; the matched text is not emitted
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t min_tokens = 0;    // end-of-generation and stop_token_ids tokens are not sampled before this many
  bool logprobs = false;     // return the chosen token's log-probability
  int32_t top_logprobs = 0;  // and this many alternatives (0..20)
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit), before the mask
  std::shared_ptr<LogitMask> logit_mask;               // none: every token allowed
};

// Whether sampling parameters are usable (finite and in range: temperature >= 0, top_p in (0, 1],
// min_p in [0, 1], top_k >= 0, repetition_penalty in (0, 10], presence and frequency penalties in
// [-2, 2], top_logprobs 0..20); the error names the field as the OpenAI API does.
Status check_sampling(const SamplingParams& s);

enum class FinishReason { kStop, kLength, kCancelled, kTimeout, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "timeout", "error"

struct TokenLogprob {
  int32_t token = 0;
  std::string text;  // the token's piece
  float logprob = 0;
};

// One event for one request, delivered in order.
struct GenerationEvent {
  enum class Kind { kTokens, kFinished };
  Kind kind = Kind::kTokens;

  // kTokens: newly generated tokens and the text they complete. Text is whole UTF-8 characters;
  // it may lag the tokens while a possible stop-string prefix is held back.
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> chosen;               // per token, when logprobs was asked
  std::vector<std::vector<TokenLogprob>> top;     // per token, top_logprobs alternatives
  // Once, before the first generated token, when the request asked for prompt_logprobs: one entry
  // per prompt token (its piece), with the log-probability the model gave it after the tokens
  // before it (the first has none: NaN), and top_logprobs alternatives per token (none for the
  // first). The model's own distribution: no penalties, bias, mask or temperature.
  std::vector<TokenLogprob> prompt_chosen;
  std::vector<std::vector<TokenLogprob>> prompt_top;

  // kFinished: the last event of a request.
  FinishReason finish_reason = FinishReason::kStop;
  Status error;                    // when finish_reason == kError
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;       // prompt tokens served from the prefix cache
  int32_t max_tokens = 0;          // the output limit it ran under (max_tokens, clamped to the context)
  // Where its time went on the engine, in seconds (all 0 when it never ran: ran == false).
  bool ran = false;                // it was scheduled at least once
  double queue_seconds = 0;        // submitted -> first scheduled
  double prefill_seconds = 0;      // first scheduled -> first token
  double decode_seconds = 0;       // first token -> last token
};

// Receives a request's events. Called on the engine thread: must not block (push to a queue and
// notify). The sink is kept alive by the engine until the kFinished event has been delivered.
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  virtual void on_event(GenerationEvent event) = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids (BOS already added when wanted)
  SamplingParams sampling;
  std::shared_ptr<GenerationSink> sink;
  std::optional<std::chrono::steady_clock::time_point> deadline;  // finish with kTimeout after this
  // No first token by then: finish with kError (StatusCode::kDeadlineExceeded). A request that
  // only scores its prompt (max_tokens 0) is exempt.
  std::optional<std::chrono::steady_clock::time_point> first_token_deadline;
  // false: never drafted for, even on an engine that speculates (bench spec runs its plain side
  // on the speculating engine itself, so both sides share one copy of the weights).
  bool speculate = true;
  // Score the prompt: an event with every prompt token's log-probability (GenerationEvent::
  // prompt_chosen) before the first generated token. Computes the whole prompt (no prefix-cache
  // reuse: every position's logits are needed). Allows sampling.max_tokens = 0.
  bool prompt_logprobs = false;
};

// Embeddings: each input's final hidden states (after the output norm), pooled and L2-normalised.
enum class Pooling { kMean, kLast };

struct EmbeddingJob {
  std::vector<std::vector<int32_t>> inputs;  // token ids per input (non-empty, within max_model_len)
  Pooling pooling = Pooling::kMean;
  // Called once with one vector per input, in order, or the reason none could be made. Runs on the
  // engine thread: must not block.
  std::function<void(Result<std::vector<std::vector<float>>>)> done;
};

struct ModelInfo {
  std::string name;            // served model name
  std::string path;
  int32_t max_model_len = 0;   // prompt + output tokens per sequence
  int32_t vocab_size = 0;
  // Bytes of the longest token text (0 = unknown): a prompt of more than max_model_len times this
  // many bytes cannot fit, which the server tells without tokenizing it.
  int32_t max_token_bytes = 0;
  std::string chat_template;   // from the model, empty when it has none
  std::string bos_token;       // token texts, for chat templates
  std::string eos_token;
  int64_t created_unix = 0;
};

class Tokenizer;

class Engine {
 public:
  virtual ~Engine() = default;

  // Queues a request. Errors: kResourceExhausted when the waiting queue is full (-> HTTP 429),
  // kCancelled while draining for shutdown (-> 503), kOutOfRange / kInvalidArgument when the
  // request can never be served (prompt + max_tokens beyond --max-model-len or the KV budget;
  // the message names the limit) (-> 400). Returns the engine's request id.
  virtual Result<uint64_t> submit(GenerationRequest request) = 0;
  // Stops a request at the next step; its sink gets kFinished(kCancelled). Unknown ids are ignored.
  virtual void cancel(uint64_t request_id) = 0;
  // Queues an embedding job (see EmbeddingJob). kUnimplemented for engines without embeddings;
  // kCancelled while draining. Each input runs as its own forward pass, so a text's vector never
  // depends on the other inputs.
  virtual Status submit_embeddings(EmbeddingJob job) {
    (void)job;
    return unimplemented("embeddings are not available with this engine");
  }

  virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const = 0;
  // A chat prompt: control tokens are parsed only outside `plain` (see Tokenizer::encode_mixed).
  // This default, for engines without such a tokenizer, parses none where any text is plain.
  virtual std::vector<int32_t> tokenize_mixed(std::string_view text, std::span<const TextRange> plain,
                                              bool add_special) const {
    return tokenize(text, add_special, /*parse_special=*/plain.empty());
  }
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  // The tokenizer, for features that need the whole vocabulary (grammars); may be null.
  virtual const Tokenizer* get_tokenizer() const { return nullptr; }
  virtual const ModelInfo& model_info() const = 0;
  virtual EngineStats stats() const = 0;

  // Shutdown: stop admitting (submit answers kCancelled), then wait until no request is left or
  // the timeout passes (remaining requests are cancelled). Returns true when it drained cleanly.
  virtual void begin_drain() = 0;
  virtual bool wait_idle(std::chrono::milliseconds timeout) = 0;
};

}  // namespace hz
