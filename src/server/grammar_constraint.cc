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

AfterReasoningMask::AfterReasoningMask(std::shared_ptr<LogitMask> inner, std::string close_tag,
                                       std::function<std::string(int32_t)> piece, bool inside, int32_t open_token)
    : inner_(std::move(inner)),
      close_tag_(std::move(close_tag)),
      piece_(std::move(piece)),
      open_token_(open_token),
      state_(inside ? State::kReasoning : open_token >= 0 ? State::kMayOpen : State::kAnswer) {}

void AfterReasoningMask::apply(float* logits, int32_t vocab) {
  switch (state_) {
    case State::kReasoning: return;
    case State::kAnswer: inner_->apply(logits, vocab); return;
    case State::kMayOpen: {
      const bool has_open = open_token_ < vocab;
      const float open_logit = has_open ? logits[open_token_] : 0.0f;
      inner_->apply(logits, vocab);
      if (has_open) logits[open_token_] = open_logit;
      return;
    }
  }
}

void AfterReasoningMask::accept(int32_t token) {
  switch (state_) {
    case State::kAnswer: inner_->accept(token); return;
    case State::kMayOpen:
      if (token == open_token_) {
        state_ = State::kReasoning;
      } else {
        state_ = State::kAnswer;
        inner_->accept(token);
      }
      return;
    case State::kReasoning:
      tail_ += piece_(token);
      if (tail_.find(close_tag_) != std::string::npos) {
        state_ = State::kAnswer;  // NOTE: text after the tag in the same token is not matched by the grammar
        tail_.clear();
        return;
      }
      if (tail_.size() >= close_tag_.size()) tail_.erase(0, tail_.size() - (close_tag_.size() - 1));
      return;
  }
}

}  // namespace hz
