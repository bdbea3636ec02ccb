#include "server/grammar_constraint.h"

#include <limits>

namespace hz {

Result<std::shared_ptr<const grammar::TokenGrammar>> GrammarCache::get(const std::string& text, const Tokenizer& tok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == text) {
        entries_.splice(entries_.begin(), entries_, it);
        return entries_.front().second;
      }
    }
    if (!vocab_) vocab_ = grammar::TokenVocab::from_tokenizer(tok);
  }
  // Parsing happens outside the lock: a large grammar does not hold up other requests.
  auto g = grammar::Grammar::parse(text);
  if (!g.ok()) return g.status();
  std::shared_ptr<const grammar::TokenVocab> vocab;
  {
    std::lock_guard<std::mutex> lock(mu_);
    vocab = vocab_;
  }
  auto compiled = std::make_shared<const grammar::TokenGrammar>(std::move(g).value(), std::move(vocab));
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace_front(text, compiled);
  if (entries_.size() > capacity_) entries_.pop_back();
  return compiled;
}

GrammarLogitMask::GrammarLogitMask(std::shared_ptr<const grammar::TokenGrammar> g)
    : matcher_(g), bits_(g->mask_words()) {}

void GrammarLogitMask::apply(float* logits, int32_t vocab) {
  matcher_.fill_mask(bits_.data());
  const int32_t n = static_cast<int32_t>(bits_.size() * 64);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  for (int32_t w = 0; w < static_cast<int32_t>(bits_.size()); ++w) {
    uint64_t word = bits_[w];
    if (word == ~uint64_t{0}) continue;
    const int32_t base = w * 64;
    for (int32_t b = 0; b < 64 && base + b < vocab; ++b) {
      if (!((word >> b) & 1)) logits[base + b] = kMinusInf;
    }
  }
  for (int32_t i = n; i < vocab; ++i) logits[i] = kMinusInf;
}

ReasoningBudget make_reasoning_budget(int32_t tokens, const std::string& message, const std::string& close_tag,
                                      const std::function<std::vector<int32_t>(const std::string&)>& tokenize) {
  ReasoningBudget b;
  b.tokens = tokens;
  if (tokens < 0) return b;
  b.close_ids = tokenize(message + close_tag);
  b.finish_ids.resize(close_tag.size());
  for (size_t k = 1; k < close_tag.size(); ++k) b.finish_ids[k] = tokenize(close_tag.substr(k));
  return b;
}

ReasoningMask::ReasoningMask(std::shared_ptr<LogitMask> inner, ReasoningTags tags,
                             std::function<std::string(int32_t)> piece, bool inside, int32_t open_token,
                             ReasoningBudget budget)
    : inner_(std::move(inner)),
      tags_(std::move(tags)),
      piece_(std::move(piece)),
      open_token_(open_token),
      budget_(std::move(budget)),
      state_(State::kAnswer) {
  if (inside) {
    start_reasoning({});
  } else if (!inner_ || open_token_ >= 0) {
    state_ = State::kMayOpen;
  }
}

void ReasoningMask::start_reasoning(std::string_view after_open) {
  state_ = State::kReasoning;
  tail_.clear();
  reasoning_tokens_ = 0;
  if (budget_.tokens == 0) {
    budget_spent_ = true;
    state_ = State::kClosing;
    forcing_ = budget_.close_ids;
    forced_at_ = 0;
    if (forcing_.empty()) to_answer();
    return;
  }
  // Text after the open tag in the token that completed it is reasoning (it may hold the close tag).
  if (!after_open.empty()) {
    tail_ = std::string(after_open);
    const size_t close = tail_.find(tags_.close);
    if (close != std::string::npos) to_answer();
  }
}

void ReasoningMask::to_answer() {
  state_ = State::kAnswer;
  tail_.clear();
  head_.clear();
  forcing_.clear();
}

void ReasoningMask::apply(float* logits, int32_t vocab) {
  switch (state_) {
    case State::kReasoning: return;
    case State::kAnswer:
      if (inner_) inner_->apply(logits, vocab);
      return;
    case State::kMayOpen: {
      if (!inner_) return;
      const bool has_open = open_token_ < vocab;
      const float open_logit = has_open ? logits[open_token_] : 0.0f;
      inner_->apply(logits, vocab);
      if (has_open) logits[open_token_] = open_logit;
      return;
    }
    case State::kClosing: {
      const int32_t want = forcing_[forced_at_];
      if (want < 0 || want >= vocab) return;  // not in these logits: nothing to force
      constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
      for (int32_t i = 0; i < vocab; ++i) logits[i] = i == want ? 0.0f : kMinusInf;
      return;
    }
  }
}

void ReasoningMask::accept(int32_t token) {
  switch (state_) {
    case State::kAnswer:
      if (inner_) inner_->accept(token);
      return;
    case State::kMayOpen:
      if (inner_) {
        if (token == open_token_) {
          start_reasoning({});
        } else {
          to_answer();
          inner_->accept(token);
        }
        return;
      }
      head_ += piece_(token);
      switch (size_t after_open = 0; reply_start(head_, tags_, &after_open)) {
        case ReplyStart::kUndecided: return;
        case ReplyStart::kAnswer: to_answer(); return;
        case ReplyStart::kReasoning: {
          const std::string after = head_.substr(after_open);
          head_.clear();
          start_reasoning(after);
          return;
        }
      }
      return;
    case State::kClosing:
      if (token == forcing_[forced_at_]) {
        if (++forced_at_ == forcing_.size()) to_answer();  // the whole tag is written
        return;
      }
      // Not the forced token (a sampler that ignored the mask): read it as reasoning again.
      state_ = State::kReasoning;
      forcing_.clear();
      [[fallthrough]];
    case State::kReasoning: {
      ++reasoning_tokens_;
      tail_ += piece_(token);
      if (tail_.find(tags_.close) != std::string::npos) {
        to_answer();  // NOTE: text after the tag in the same token is not matched by the grammar
        return;
      }
      if (tail_.size() >= tags_.close.size()) tail_.erase(0, tail_.size() - (tags_.close.size() - 1));
      if (budget_.tokens >= 0 && reasoning_tokens_ >= budget_.tokens) {
        budget_spent_ = true;
        // A tag the reasoning has begun is finished rather than written again after the message.
        const size_t k = partial_tag_suffix(tail_, tags_.close);
        const bool finish = k > 0 && k < budget_.finish_ids.size() && !budget_.finish_ids[k].empty();
        forcing_ = finish ? budget_.finish_ids[k] : budget_.close_ids;
        forced_at_ = 0;
        state_ = forcing_.empty() ? State::kReasoning : State::kClosing;
      }
      return;
    }
  }
}

}  // namespace hz
