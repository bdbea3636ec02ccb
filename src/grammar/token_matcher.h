// Token-level grammar matching: which tokens of the vocabulary may come next (a bit mask), and
// advancing over the sampled token.
//
// TokenGrammar (shared, thread-safe) holds per grammar position the tokens decided by that
// position's own rule and the rules it is statically nested in (rules with a single call site):
// `accepted` tokens fit whatever lies below on the stack, `uncertain` ones run past those rules and
// are checked against the real stack at mask time. For a JSON grammar nearly every token is decided
// in advance, so a mask costs an OR of a few bit sets plus a few hundred short checks.
// GrammarMatcher (one per request, one thread) holds the stack set of the generated text.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_vocab.h"

namespace hz::grammar {

class TokenGrammar {
 public:
  TokenGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab);
  ~TokenGrammar();
  TokenGrammar(const TokenGrammar&) = delete;
  TokenGrammar& operator=(const TokenGrammar&) = delete;

  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  int32_t mask_words() const { return (vocab_->size() + 63) / 64; }

  // Computes the table of every byte position now (else each is computed on first use).
  void precompute_all() const;

  struct PositionMask {
    std::vector<uint64_t> accepted_bits;  // [mask_words] when dense, else empty
    std::vector<int32_t> accepted_ids;    // when sparse
    std::vector<int32_t> uncertain;       // checked against the full stack
    size_t uncertain_subtrees_nodes = 0;  // trie nodes of uncertain tokens (cost estimate)
  };
  const PositionMask& position_mask(uint32_t pos) const;

  // Trie walk from `start` over all tokens: sets bits of tokens that keep some stack alive.
  void walk_all(const StackSet& start, uint64_t* bits) const;

 private:
  void build_position(uint32_t pos, PositionMask* out) const;

  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  struct Slot;
  std::unique_ptr<Slot[]> slots_;  // [elements], filled for byte positions on first use
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const TokenGrammar> g);

  // bits[mask_words]: 1 = the token may come next. End-of-generation tokens are set when the
  // grammar can end here. When nothing fits (a grammar whose next bytes no token provides), only
  // end-of-generation tokens are set.
  void fill_mask(uint64_t* bits);
  // Advances over a sampled token. Returns false when the token does not fit (the matcher then
  // only allows end-of-generation tokens).
  bool accept(int32_t token);
  bool can_end() const { return stacks_.has_empty_stack(); }
  bool failed() const { return failed_; }
  // Rejects the bytes? (no state change) — tests.
  bool accepts_bytes(std::string_view bytes) const;

 private:
  bool check_token(const uint32_t* begin, const uint32_t* end, const std::string& piece);

  std::shared_ptr<const TokenGrammar> g_;
  StackSet stacks_;
  bool failed_ = false;
  bool ended_ = false;  // an end-of-generation token was accepted
  StackSet a_, b_, single_;
  std::vector<uint32_t> scratch_;
};

}  // namespace hz::grammar
