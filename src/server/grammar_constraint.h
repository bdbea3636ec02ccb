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
#include <string_view>
#include <vector>

#include "base/status.h"
#include "chat/reasoning.h"
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

// A reasoning budget: after `tokens` tokens of reasoning the close tag is forced, so a model that
// would think on and on gives an answer (vLLM's thinking_token_budget, llama-server's
// --reasoning-budget, Anthropic's thinking.budget_tokens).
struct ReasoningBudget {
  int32_t tokens = -1;  // < 0: no budget
  // The tokens forced when it is spent: the message (may be empty), then the close tag.
  std::vector<int32_t> close_ids;
  // finish_ids[k], 0 < k < the tag's length: the tokens that finish a close tag whose first k bytes
  // the reasoning already ends with (a model that was closing on its own is not made to restart).
  std::vector<std::vector<int32_t>> finish_ids;
};

// `tokenize` turns text into the ids the model would read (special tokens such as </think> as one).
ReasoningBudget make_reasoning_budget(int32_t tokens, const std::string& message, const std::string& close_tag,
                                      const std::function<std::vector<int32_t>(const std::string&)>& tokenize);

// The mask of a reply from a model that reasons (chat/reasoning.h):
// - `inner` (a grammar; may be null) applies to the answer, from the token after the one that
//   completes the close tag. Without this a grammar would force its first token into the
//   reasoning, which then never closes, and the answer would be empty.
// - `budget`: once the reasoning has that many tokens, the close tag is forced.
// `inside`: the prompt opened the reasoning. Otherwise, with an `inner` mask, the first token may
// be `open_token` (the open tag as one token, as Qwen3's <think> is) besides what `inner` allows,
// and choosing it starts the reasoning; without one the reply has none. Without an `inner` mask
// the reply's text is watched: one that begins (after whitespace) with the open tag reasons, as
// split_reasoning() reads it.
class ReasoningMask : public LogitMask {
 public:
  // `piece`: a token's text as the reply shows it (special tokens such as </think> included).
  ReasoningMask(std::shared_ptr<LogitMask> inner, ReasoningTags tags, std::function<std::string(int32_t)> piece,
                bool inside, int32_t open_token = -1, ReasoningBudget budget = {});
  void apply(float* logits, int32_t vocab) override;
  void accept(int32_t token) override;
  bool reasoning_done() const { return state_ == State::kAnswer; }
  // Whether the budget ran out and the close tag was (or is being) forced.
  bool budget_spent() const { return budget_spent_; }

 private:
  enum class State { kMayOpen, kReasoning, kClosing, kAnswer };
  void start_reasoning(std::string_view after_open);
  void to_answer();

  std::shared_ptr<LogitMask> inner_;
  ReasoningTags tags_;
  std::function<std::string(int32_t)> piece_;
  int32_t open_token_;
  ReasoningBudget budget_;
  State state_;
  std::string head_;                 // kMayOpen without inner: the reply so far
  std::string tail_;                 // the reasoning's last bytes (fewer than the tag's), which may begin the tag
  int32_t reasoning_tokens_ = 0;
  std::vector<int32_t> forcing_;     // kClosing: the tokens still to force, first at forced_at_
  size_t forced_at_ = 0;
  bool budget_spent_ = false;
};

}  // namespace hz
