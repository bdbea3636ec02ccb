// The engine as the server sees it: submit generation requests, receive events, cancel, observe.
// Implementations own an engine thread (scheduler, KV cache and model live there, without locks);
// every method here is thread-safe and non-blocking, so HTTP threads may call it directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

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
  int32_t max_tokens = 16;          // generated tokens at most; the output is cut there (finish: length)
  std::vector<std::string> stop;    // stop strings; the matched text is not emitted
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool logprobs = false;     // return the chosen token's log-probability
  int32_t top_logprobs = 0;  // and this many alternatives (0..20)
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit), before the mask
  std::shared_ptr<LogitMask> logit_mask;               // none: every token allowed
};

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

  // kFinished: the last event of a request.
  FinishReason finish_reason = FinishReason::kStop;
  Status error;                    // when finish_reason == kError
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;       // prompt tokens served from the prefix cache
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
};

struct ModelInfo {
  std::string name;            // served model name
  std::string path;
  int32_t max_model_len = 0;   // prompt + output tokens per sequence
  int32_t vocab_size = 0;
  std::string chat_template;   // from the model, empty when it has none
  std::string bos_token;       // token texts, for chat templates
  std::string eos_token;
  int64_t created_unix = 0;
};

// A snapshot for /metrics and /ready.
struct EngineStats {
  int32_t running = 0;           // sequences in the running batch
  int32_t waiting = 0;           // admitted, not yet running
  int32_t max_queue = 0;         // waiting-queue capacity
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t requests_finished_total = 0;
  uint64_t queue_rejections_total = 0;
  uint64_t preemptions_total = 0;
  uint64_t steps_total = 0;
  int32_t max_seqs_in_step = 0;  // largest number of sequences decoded together in one step so far
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;    // referenced by a running sequence
  int64_t kv_blocks_cached = 0;  // unreferenced, kept for prefix reuse
  int64_t kv_blocks_free = 0;
  uint64_t prefix_cache_queries = 0;  // prompt blocks looked up
  uint64_t prefix_cache_hits = 0;     // of which found
  uint64_t prefix_cache_evictions = 0;  // cached blocks reused for other data
  // KV tiers. RAM: the arena's blocks in use or cached. Disk: see kv/disk_tier.h.
  uint64_t kv_ram_bytes_total = 0;
  uint64_t kv_ram_bytes_used = 0;      // referenced + cached blocks
  bool kv_disk_enabled = false;
  bool kv_disk_degraded = false;       // an I/O error turned the disk tier off (RAM only)
  uint64_t kv_disk_blocks = 0;
  uint64_t kv_disk_bytes_used = 0;
  uint64_t kv_disk_bytes_total = 0;    // budget
  uint64_t kv_disk_hits = 0;           // records read and verified
  uint64_t kv_disk_promotions = 0;     // blocks brought back into RAM
  uint64_t kv_disk_demotions = 0;      // blocks evicted from RAM that are kept on disk
  uint64_t kv_disk_writes = 0;         // records written (on eviction, behind when idle, at shutdown)
  uint64_t kv_disk_evictions = 0;      // records dropped for room
  uint64_t kv_disk_checksum_failures = 0;
  uint64_t kv_disk_io_errors = 0;
  uint64_t kv_disk_read_bytes = 0;
  uint64_t kv_disk_write_bytes = 0;
  double kv_disk_read_seconds = 0;
  double kv_disk_write_seconds = 0;
  // The far tier: running sequences' far blocks on disk (kv/far_tier.h), with --kv-disk-dir.
  bool kv_far_enabled = false;
  bool kv_far_degraded = false;        // an I/O error stopped further spills
  uint64_t kv_far_blocks = 0;
  uint64_t kv_far_bytes_used = 0;
  uint64_t kv_far_bytes_total = 0;
  uint64_t kv_far_spills = 0;          // blocks moved out of RAM
  uint64_t kv_far_read_bytes = 0;      // checked and read by attention
  uint64_t kv_far_write_bytes = 0;
  uint64_t kv_far_checksum_failures = 0;
  uint64_t kv_far_io_errors = 0;
  uint64_t kv_far_recomputes = 0;      // sequences recomputed after a checksum failure
  bool draining = false;
  // Engine loop liveness: time of the last completed step or idle tick.
  std::chrono::steady_clock::time_point last_progress{};
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

  virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const = 0;
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
