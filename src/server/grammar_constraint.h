// Grammar-constrained generation for the server: compiled grammars cached by their text (a client
// sending the same schema again skips compiling and reuses the per-position token tables), and the
// per-request LogitMask the sampler applies. The cache is thread-safe; a mask belongs to one request.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/token_matcher.h"
#include "runtime/engine_api.h"

namespace hz {

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 32) : capacity_(capacity) {}
  // Parses (or finds) `text` compiled for the tokenizer's vocabulary. Errors name the problem.
  Result<std::shared_ptr<const grammar::TokenGrammar>> get(const std::string& text, const Tokenizer& tok);

 private:
  std::mutex mu_;
  size_t capacity_;
  std::shared_ptr<const grammar::TokenVocab> vocab_;  // built on first use
  std::list<std::pair<std::string, std::shared_ptr<const grammar::TokenGrammar>>> entries_;  // most recent first
};

class GrammarLogitMask : public LogitMask {
 public:
  explicit GrammarLogitMask(std::shared_ptr<const grammar::TokenGrammar> g);
  void apply(float* logits, int32_t vocab) override;
  void accept(int32_t token) override { matcher_.accept(token); }

 private:
  grammar::GrammarMatcher matcher_;
  std::vector<uint64_t> bits_;
};

// Constrained output from a model that reasons (chat/reasoning.h): the reasoning is free text,
// and `inner` applies to the answer, from the token after the one that completes the close tag.
// Without this a grammar would force its first token into the reasoning, which then never closes,
// and the answer would be empty. `inside`: the prompt opened the reasoning. Otherwise, with an
// `open_token` (the open tag as one token, as Qwen3's <think> is), the first token may be that tag
// besides what `inner` allows, and choosing it starts the reasoning; without one the reply has none.
class AfterReasoningMask : public LogitMask {
 public:
  // `piece`: a token's text as the reply shows it (special tokens such as </think> included).
  AfterReasoningMask(std::shared_ptr<LogitMask> inner, std::string close_tag, std::function<std::string(int32_t)> piece,
                     bool inside, int32_t open_token = -1);
  void apply(float* logits, int32_t vocab) override;
  void accept(int32_t token) override;
  bool reasoning_done() const { return state_ == State::kAnswer; }

 private:
  enum class State { kMayOpen, kReasoning, kAnswer };
  std::shared_ptr<LogitMask> inner_;
  std::string close_tag_;
  std::function<std::string(int32_t)> piece_;
  int32_t open_token_;
  State state_;
  std::string tail_;  // the reply's last bytes (fewer than the tag's), which may begin the tag
};

}  // namespace hz
