// FakeEngine: an Engine for server tests. A background thread "generates" deterministic tokens:
// the prompt's bytes echoed cyclically (one token per byte, id = byte + 3, BOS = 1), one token per
// running request per step. Prompt logprobs: prompt token i scores -0.25 * i (BOS's piece is ""). Honours max_tokens, stop strings, deadlines (total and first-token), cancel and drain; can be
// slowed (token_delay), paused (nothing leaves the waiting queue) or made to fail.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine_api.h"

namespace hz::test {

class FakeEngine : public Engine {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int32_t kBos = 1;
  static constexpr int32_t kByteBase = 3;

  struct Options {
    int32_t max_model_len = 256;
    int32_t max_queue = 8;    // waiting requests at most; more -> kResourceExhausted
    int32_t max_running = 4;  // requests stepped together
    std::chrono::milliseconds token_delay{0};  // per step
    int32_t cached_tokens = 0;                 // reported as prefix-cache hits per request
    // tokenize() takes this long per KiB of text (a stand-in for a real tokenizer's cost).
    std::chrono::microseconds tokenize_cost_per_kib{0};
    int32_t max_token_bytes = 0;               // ModelInfo::max_token_bytes
  };

  FakeEngine() : FakeEngine(Options()) {}
  explicit FakeEngine(Options o) : opts_(o) {
    info_.name = "fake-model";
    info_.path = "/models/fake-model.gguf";
    info_.max_model_len = o.max_model_len;
    info_.vocab_size = 256 + kByteBase;
    info_.max_token_bytes = o.max_token_bytes;
    info_.created_unix = 1700000000;
    last_progress_ = Clock::now();
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeEngine() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // --- knobs and observations for tests ---
  void set_paused(bool paused) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      paused_ = paused;
    }
    cv_.notify_all();
  }
  void set_token_delay(std::chrono::milliseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    opts_.token_delay = d;
  }
  // The next submit answers this error.
  void fail_next_submit(Status s) { fail_submit_after(0, std::move(s)); }
  // The next `ok` submits go through, the one after answers this error.
  void fail_submit_after(int ok, Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    submits_before_error_ = ok;
    next_submit_error_ = std::move(s);
  }
  int cancel_calls() const { return cancel_calls_.load(); }
  // The sampling parameters of the last request submitted.
  SamplingParams last_sampling() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_sampling_;
  }
  int submitted() const { return submitted_.load(); }
  int tokenize_calls() const { return tokenize_calls_.load(); }
  std::vector<FinishReason> finish_reasons() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finish_reasons_;
  }
  int num_requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(waiting_.size() + running_.size());
  }

  // --- Engine ---
  Result<uint64_t> submit(GenerationRequest r) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!next_submit_error_.ok() && submits_before_error_-- == 0) {
      Status s = next_submit_error_;
      next_submit_error_ = Status();
      return s;
    }
    if (draining_) return Status(StatusCode::kCancelled, "the engine is draining for shutdown");
    if (static_cast<int32_t>(r.prompt.size()) + r.sampling.max_tokens > opts_.max_model_len) {
      return out_of_range("prompt + max_tokens = {} is beyond max_model_len {}",
                          r.prompt.size() + r.sampling.max_tokens, opts_.max_model_len);
    }
    if (static_cast<int32_t>(waiting_.size()) >= opts_.max_queue) {
      ++queue_rejections_;
      return Status(StatusCode::kResourceExhausted, "the waiting queue is full");
    }
    last_sampling_ = r.sampling;
    Seq s;
    s.id = next_id_++;
    s.req = std::move(r);
    for (int32_t t : s.req.prompt) {
      if (t >= kByteBase) s.echo.push_back(static_cast<char>(t - kByteBase));
    }
    if (s.echo.empty()) s.echo = "x";
    for (const auto& stop : s.req.sampling.stop) s.max_stop = std::max(s.max_stop, stop.size());
    waiting_.push_back(std::move(s));
    ++submitted_;
    cv_.notify_all();
    return waiting_.back().id;
  }

  void cancel(uint64_t id) override {
    ++cancel_calls_;
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.insert(id);
    cv_.notify_all();
  }

  std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool) const override {
    ++tokenize_calls_;
    if (opts_.tokenize_cost_per_kib.count() > 0) std::this_thread::sleep_for(opts_.tokenize_cost_per_kib * (text.size() / 1024));
    std::vector<int32_t> out;
    if (add_special) out.push_back(kBos);
    for (unsigned char c : text) out.push_back(kByteBase + c);
    return out;
  }
  // Bytes as tokenize(); records the plain parts (what a chat prompt took from the request).
  std::vector<int32_t> tokenize_mixed(std::string_view text, std::span<const TextRange> plain,
                                      bool add_special) const override {
    {
      std::lock_guard<std::mutex> lock(plain_mu_);
      plain_parts_.clear();
      for (const TextRange& r : plain) plain_parts_.emplace_back(text.substr(r.begin, r.end - r.begin));
      ++mixed_calls_;
    }
    return tokenize(text, add_special, false);
  }
  std::vector<std::string> last_plain_parts() const {
    std::lock_guard<std::mutex> lock(plain_mu_);
    return plain_parts_;
  }
  int mixed_calls() const {
    std::lock_guard<std::mutex> lock(plain_mu_);
    return mixed_calls_;
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t t : ids) {
      if (t >= kByteBase) out.push_back(static_cast<char>(t - kByteBase));
    }
    return out;
  }
  const ModelInfo& model_info() const override { return info_; }

  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineStats s;
    s.running = static_cast<int32_t>(running_.size());
    s.waiting = static_cast<int32_t>(waiting_.size());
    s.max_queue = opts_.max_queue;
    s.prompt_tokens_total = prompt_tokens_total_;
    s.generation_tokens_total = generation_tokens_total_;
    s.requests_finished_total = finished_total_;
    s.queue_rejections_total = queue_rejections_;
    s.steps_total = steps_;
    s.max_seqs_in_step = max_seqs_in_step_;
    s.kv_blocks_total = 64;
    s.kv_blocks_used = static_cast<int64_t>(running_.size());
    s.kv_blocks_free = s.kv_blocks_total - s.kv_blocks_used;
    s.draining = draining_;
    s.last_progress = last_progress_;
    return s;
  }

  void begin_drain() override {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }
  bool wait_idle(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    bool clean = idle_cv_.wait_for(lock, timeout, [this] { return waiting_.empty() && running_.empty(); });
    if (clean) return true;
    for (const auto& s : waiting_) cancelled_.insert(s.id);
    for (const auto& s : running_) cancelled_.insert(s.id);
    paused_ = false;
    cv_.notify_all();
    idle_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return waiting_.empty() && running_.empty(); });
    return false;
  }

 private:
  struct Seq {
    uint64_t id = 0;
    GenerationRequest req;
    std::string echo;       // what this "model" repeats
    size_t echo_at = 0;     // the echo's next byte
    std::string text;       // generated so far
    size_t emitted = 0;     // bytes of `text` already sent
    size_t max_stop = 0;
    int32_t generated = 0;
    bool prompt_scored = false;
  };
  struct Delivery {
    std::shared_ptr<GenerationSink> sink;
    GenerationEvent event;
  };

  void finish(Seq& s, FinishReason reason, std::vector<Delivery>& out, Status error = Status()) {
    GenerationEvent e;
    e.kind = GenerationEvent::Kind::kFinished;
    e.finish_reason = reason;
    e.error = std::move(error);
    e.prompt_tokens = static_cast<int32_t>(s.req.prompt.size());
    e.completion_tokens = s.generated;
    e.cached_tokens = std::min<int32_t>(opts_.cached_tokens, e.prompt_tokens);
    finish_reasons_.push_back(reason);
    ++finished_total_;
    out.push_back({s.req.sink, std::move(e)});
  }

  // One token for `s`; returns true when it finished.
  bool step(Seq& s, std::vector<Delivery>& out) {
    if (s.req.prompt_logprobs && !s.prompt_scored) {
      s.prompt_scored = true;
      GenerationEvent p;
      for (size_t i = 0; i < s.req.prompt.size(); ++i) {
        const int32_t t = s.req.prompt[i];
        std::string piece = t >= kByteBase ? std::string(1, static_cast<char>(t - kByteBase)) : std::string();
        p.prompt_chosen.push_back(
            {t, piece, i == 0 ? std::numeric_limits<float>::quiet_NaN() : -0.25f * static_cast<float>(i)});
        std::vector<TokenLogprob> alts;
        for (int k = 0; i > 0 && k < s.req.sampling.top_logprobs; ++k) {
          alts.push_back({kByteBase + 'a' + k, std::string(1, static_cast<char>('a' + k)), -1.0f - k});
        }
        p.prompt_top.push_back(std::move(alts));
      }
      out.push_back({s.req.sink, std::move(p)});
      if (s.req.sampling.max_tokens == 0) return finish(s, FinishReason::kLength, out), true;
    }
    // The echo's next byte, unless a logit mask (a reasoning budget) forbids it: then the token it
    // leaves (the highest-scoring, the echo's byte preferred) is inserted and the echo waits.
    const int32_t want = kByteBase + static_cast<unsigned char>(s.echo[s.echo_at % s.echo.size()]);
    int32_t token = want;
    if (s.req.sampling.logit_mask) {
      std::vector<float> logits(static_cast<size_t>(info_.vocab_size), 0.0f);
      logits[want] = 1.0f;
      s.req.sampling.logit_mask->apply(logits.data(), info_.vocab_size);
      token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      s.req.sampling.logit_mask->accept(token);
    }
    if (token == want) ++s.echo_at;
    const char c = token >= kByteBase ? static_cast<char>(token - kByteBase) : '?';
    s.text.push_back(c);
    ++s.generated;
    ++generation_tokens_total_;
    GenerationEvent e;
    e.token_ids.push_back(token);
    if (s.req.sampling.logprobs) {
      e.chosen.push_back({e.token_ids[0], std::string(1, c), -0.5f});
      std::vector<TokenLogprob> alts;
      for (int k = 0; k < s.req.sampling.top_logprobs; ++k) {
        alts.push_back({kByteBase + 'a' + k, std::string(1, static_cast<char>('a' + k)), -1.0f - k});
      }
      e.top.push_back(std::move(alts));
    }
    // Stop strings: emit up to the match; otherwise hold back a possible stop prefix.
    size_t hit = std::string::npos;
    for (const auto& stop : s.req.sampling.stop) hit = std::min(hit, s.text.find(stop));
    bool at_length = s.generated >= s.req.sampling.max_tokens;
    bool fail = s.echo.find("!ERR") != std::string::npos;
    size_t upto = hit != std::string::npos ? hit
                  : at_length || fail     ? s.text.size()
                                          : s.text.size() - std::min(s.text.size(), s.max_stop > 0 ? s.max_stop - 1 : 0);
    if (upto > s.emitted) {
      e.text = s.text.substr(s.emitted, upto - s.emitted);
      s.emitted = upto;
    }
    out.push_back({s.req.sink, std::move(e)});
    if (fail) return finish(s, FinishReason::kError, out, Status(StatusCode::kInternal, "fake engine failure")), true;
    if (hit != std::string::npos) return finish(s, FinishReason::kStop, out), true;
    if (at_length) return finish(s, FinishReason::kLength, out), true;
    return false;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
      std::vector<Delivery> out;
      last_progress_ = Clock::now();
      // Cancellations and deadlines first, for waiting and running requests alike.
      auto expire = [&](std::deque<Seq>& q) {
        for (auto it = q.begin(); it != q.end();) {
          bool cancelled = cancelled_.count(it->id) > 0;
          bool late = it->req.deadline && Clock::now() > *it->req.deadline;
          bool no_first_token = it->req.first_token_deadline && it->generated == 0 &&
                                it->req.sampling.max_tokens > 0 && Clock::now() > *it->req.first_token_deadline;
          if (cancelled || late) {
            finish(*it, cancelled ? FinishReason::kCancelled : FinishReason::kTimeout, out);
            it = q.erase(it);
          } else if (no_first_token) {  // as LocalEngine: an error, not a finish reason
            finish(*it, FinishReason::kError, out, Status(StatusCode::kDeadlineExceeded, "no first token in time"));
            it = q.erase(it);
          } else {
            ++it;
          }
        }
      };
      expire(waiting_);
      expire(running_);
      if (!paused_) {
        while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < opts_.max_running) {
          prompt_tokens_total_ += waiting_.front().req.prompt.size();
          running_.push_back(std::move(waiting_.front()));
          waiting_.pop_front();
        }
        if (!running_.empty()) {
          ++steps_;
          max_seqs_in_step_ = std::max<int32_t>(max_seqs_in_step_, static_cast<int32_t>(running_.size()));
          for (auto it = running_.begin(); it != running_.end();) {
            it = step(*it, out) ? running_.erase(it) : it + 1;
          }
        }
      }
      if (waiting_.empty() && running_.empty()) idle_cv_.notify_all();
      // Deliver outside the lock: sinks may call back into the server, which may call us.
      lock.unlock();
      for (auto& d : out) d.sink->on_event(std::move(d.event));
      out.clear();
      lock.lock();
      bool busy = !running_.empty() && !paused_;
      auto delay = busy ? opts_.token_delay : std::chrono::milliseconds(5);
      if (busy && delay.count() == 0) continue;
      cv_.wait_for(lock, delay, [&] { return quit_ || (!busy && (!waiting_.empty() && !paused_)); });
    }
  }

  Options opts_;
  ModelInfo info_;
  mutable std::mutex plain_mu_;
  mutable std::vector<std::string> plain_parts_;
  mutable int mixed_calls_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Seq> waiting_, running_;
  std::set<uint64_t> cancelled_;
  std::vector<FinishReason> finish_reasons_;
  SamplingParams last_sampling_;
  Status next_submit_error_;
  int submits_before_error_ = 0;
  bool paused_ = false, draining_ = false, quit_ = false;
  uint64_t next_id_ = 1;
  uint64_t prompt_tokens_total_ = 0, generation_tokens_total_ = 0, finished_total_ = 0, queue_rejections_ = 0,
           steps_ = 0;
  int32_t max_seqs_in_step_ = 0;
  Clock::time_point last_progress_;
  std::atomic<int> cancel_calls_{0}, submitted_{0};
  mutable std::atomic<int> tokenize_calls_{0};
  std::thread thread_;
};

}  // namespace hz::test
