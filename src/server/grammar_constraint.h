// Grammar-constrained generation for the server: compiled grammars cached by their text (a client
// sending the same schema again skips compiling and reuses the per-position token tables), and the
// per-request LogitMask the sampler applies. The cache is thread-safe; a mask belongs to one request.
#pragma once

#include <cstdint>
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

}  // namespace hz
