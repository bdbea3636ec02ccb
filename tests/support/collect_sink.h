// A GenerationSink for engine tests: collects token ids, text, chosen and top log-probabilities,
// keeps the final event and lets the test wait for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine_api.h"

namespace hz::test {

// A greedy request for `n` tokens (EOS ignored) whose events go to `sink`.
inline GenerationRequest greedy_request(std::vector<int32_t> prompt, int n, std::shared_ptr<GenerationSink> sink) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = n;
  r.sampling.ignore_eos = true;
  r.sink = std::move(sink);
  return r;
}

class CollectSink : public GenerationSink {
 public:
  void on_event(GenerationEvent ev) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (ev.kind == GenerationEvent::Kind::kTokens) {
      if (!ev.prompt_chosen.empty()) {
        ++prompt_events;
        tokens_before_prompt = static_cast<int>(ids.size());
        prompt_chosen = std::move(ev.prompt_chosen);
        prompt_top = std::move(ev.prompt_top);
      }
      ids.insert(ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      text += ev.text;
      for (auto& c : ev.chosen) chosen.push_back(c.logprob);
      for (auto& t : ev.top) {
        for (auto& x : t) top.emplace_back(x.token, x.logprob);
      }
      return;
    }
    final_event = std::move(ev);
    done = true;
    cv_.notify_all();
  }
  // True once the final event arrived within `timeout`.
  bool wait(std::chrono::seconds timeout = std::chrono::seconds(300)) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return done; });
  }

  std::vector<int32_t> ids;
  std::string text;
  std::vector<float> chosen;
  std::vector<std::pair<int32_t, float>> top;
  GenerationEvent final_event;
  bool done = false;
  // Prompt logprobs (GenerationRequest::prompt_logprobs): the event's, how many such events came
  // and how many tokens had come before it.
  std::vector<TokenLogprob> prompt_chosen;
  std::vector<std::vector<TokenLogprob>> prompt_top;
  int prompt_events = 0;
  int tokens_before_prompt = -1;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace hz::test
