#include "grammar/token_matcher.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace hz::grammar {
namespace {

// Above this many uncertain tokens a position's check walks the trie from the real stack instead of
// checking tokens one by one (the walk shares their common prefixes).
constexpr size_t kMaxTokenChecks = 2048;

void set_bit(uint64_t* bits, int32_t id) { bits[id >> 6] |= uint64_t{1} << (id & 63); }
bool test_bit(const uint64_t* bits, int32_t id) { return (bits[id >> 6] >> (id & 63)) & 1; }

}  // namespace

struct TokenGrammar::Slot {
  std::once_flag once;
  PositionMask mask;
};

TokenGrammar::TokenGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)),
      slots_(std::make_unique<Slot[]>(grammar_.elements().size())) {}

TokenGrammar::~TokenGrammar() = default;

const TokenGrammar::PositionMask& TokenGrammar::position_mask(uint32_t pos) const {
  Slot& s = slots_[pos];
  std::call_once(s.once, [&] { build_position(pos, &s.mask); });
  return s.mask;
}

void TokenGrammar::precompute_all() const {
  const auto& elems = grammar_.elements();
  for (uint32_t p = 0; p < elems.size(); ++p) {
    if (elems[p].kind == Element::Kind::kBytes && grammar_.reachable(grammar_.rule_of(p))) position_mask(p);
  }
}

namespace {

// StackSets met during one trie walk, interned, with their transitions filled on first use: inside
// a JSON string nearly every prefix leads back to the same few sets, so most trie nodes cost one
// table lookup instead of a stack expansion.
class LazyDfa {
 public:
  static constexpr int32_t kDead = -1;
  explicit LazyDfa(const Grammar& g) : g_(g) {}

  int32_t intern(const StackSet& s) {
    if (s.empty()) return kDead;
    const uint64_t h = s.hash();
    auto [lo, hi] = index_.equal_range(h);
    for (auto it = lo; it != hi; ++it) {
      if (states_[it->second] == s) return it->second;
    }
    const int32_t id = static_cast<int32_t>(states_.size());
    states_.push_back(s);
    has_empty_.push_back(s.has_empty_stack());
    has_nonempty_.push_back(s.has_nonempty_stack());
    next_.resize(next_.size() + 256, kUnknown);
    index_.emplace(h, id);
    return id;
  }

  int32_t step(int32_t s, uint8_t b) {
    int32_t& n = next_[static_cast<size_t>(s) * 256 + b];
    if (n == kUnknown) {
      g_.advance(states_[s], b, &tmp_, &scratch_);
      const int32_t id = intern(tmp_);
      next_[static_cast<size_t>(s) * 256 + b] = id;  // `n` may dangle: intern grows next_
      return id;
    }
    return n;
  }

  bool has_empty(int32_t s) const { return s >= 0 && has_empty_[s]; }
  bool has_nonempty(int32_t s) const { return s >= 0 && has_nonempty_[s]; }

 private:
  static constexpr int32_t kUnknown = -2;
  const Grammar& g_;
  std::vector<StackSet> states_;
  std::vector<bool> has_empty_, has_nonempty_;
  std::vector<int32_t> next_;  // [states][256]
  std::unordered_multimap<uint64_t, int32_t> index_;
  StackSet tmp_;
  std::vector<uint32_t> scratch_;
};

// Walks the vocabulary trie from `start`. Tokens whose bytes keep a stack alive go to `accepted`.
// With `local` (start is the statically known top of the real stack): a token that runs past the
// bottom of `start` (an empty stack, then more bytes) goes to `uncertain` unless some other path
// accepts it; `start` then must not contain an empty stack.
void walk_trie(const Grammar& g, const TokenVocab::Trie& t, const StackSet& start, bool local,
               std::vector<int32_t>* accepted, std::vector<int32_t>* uncertain) {
  LazyDfa dfa(g);
  std::vector<int32_t> st(t.max_depth + 1);
  std::vector<uint8_t> ctx(t.max_depth + 1, 0);
  st[0] = dfa.intern(start);
  const uint32_t n = static_cast<uint32_t>(t.byte.size());
  for (uint32_t i = 1; i < n;) {
    const size_t d = t.depth[i];
    const int32_t cur = dfa.step(st[d - 1], t.byte[i]);
    st[d] = cur;
    const uint32_t here_begin = t.tok_begin[i];
    const uint32_t here_end = here_begin + t.num_here[i];
    if (cur != LazyDfa::kDead) {
      for (uint32_t k = here_begin; k < here_end; ++k) accepted->push_back(t.tokens[k]);
    } else if (local && ctx[d - 1]) {
      for (uint32_t k = here_begin; k < here_end; ++k) uncertain->push_back(t.tokens[k]);
    }
    if (local) ctx[d] = ctx[d - 1] || dfa.has_empty(cur);
    if (!dfa.has_nonempty(cur)) {
      if (local && ctx[d]) {
        for (uint32_t k = here_end; k < t.tok_begin[t.end[i]]; ++k) uncertain->push_back(t.tokens[k]);
      }
      i = t.end[i];
      continue;
    }
    ++i;
  }
}

}  // namespace

void TokenGrammar::build_position(uint32_t pos, PositionMask* out) const {
  // The statically known part of any stack with `pos` on top: the continuation of each enclosing
  // rule that has a single call site (see Grammar::finish), bottom first.
  const auto& elems = grammar_.elements();
  std::vector<uint32_t> below;
  uint32_t r = grammar_.rule_of(pos);
  // Chains end at the root (it has no call site); the bound only guards against a cycle.
  for (size_t k = 0; k < grammar_.rules().size(); ++k) {
    const int64_t site = grammar_.single_call_site(r);
    if (site < 0) break;
    if (elems[site + 1].kind != Element::Kind::kEnd) below.push_back(static_cast<uint32_t>(site + 1));
    r = grammar_.rule_of(static_cast<uint32_t>(site));
  }
  std::vector<uint32_t> stack(below.rbegin(), below.rend());
  stack.push_back(pos);
  StackSet start;
  start.add(stack.data(), stack.data() + stack.size());
  std::vector<int32_t> accepted;
  walk_trie(grammar_, vocab_->trie(), start, true, &accepted, &out->uncertain);
  if (accepted.size() * 32 > static_cast<size_t>(vocab_->size())) {
    out->accepted_bits.assign(mask_words(), 0);
    for (int32_t id : accepted) set_bit(out->accepted_bits.data(), id);
  } else {
    std::sort(accepted.begin(), accepted.end());
    out->accepted_ids = std::move(accepted);
  }
}

void TokenGrammar::walk_all(const StackSet& start, uint64_t* bits) const {
  std::vector<int32_t> accepted;
  walk_trie(grammar_, vocab_->trie(), start, false, &accepted, nullptr);
  for (int32_t id : accepted) set_bit(bits, id);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const TokenGrammar> g) : g_(std::move(g)) {
  g_->grammar().initial(&stacks_);
}

bool GrammarMatcher::check_token(const uint32_t* begin, const uint32_t* end, const std::string& piece) {
  a_.clear();
  a_.add(begin, end);
  const Grammar& gr = g_->grammar();
  for (char c : piece) {
    gr.advance(a_, static_cast<uint8_t>(c), &b_, &scratch_);
    std::swap(a_, b_);
    if (a_.empty()) return false;
  }
  return true;
}

void GrammarMatcher::fill_mask(uint64_t* bits) {
  const int32_t words = g_->mask_words();
  std::memset(bits, 0, static_cast<size_t>(words) * sizeof(uint64_t));
  const TokenVocab& vocab = g_->vocab();
  bool end = false;
  bool any = false;
  if (!failed_ && !ended_) {
    for (size_t i = 0; i < stacks_.size(); ++i) {
      const uint32_t* sb = stacks_.stack_begin(i);
      const uint32_t* se = stacks_.stack_end(i);
      if (sb == se) {
        end = true;
        continue;
      }
      const TokenGrammar::PositionMask& pm = g_->position_mask(se[-1]);
      if (!pm.accepted_bits.empty()) {
        for (int32_t w = 0; w < words; ++w) bits[w] |= pm.accepted_bits[w];
        any = true;
      }
      for (int32_t id : pm.accepted_ids) set_bit(bits, id);
      any = any || !pm.accepted_ids.empty();
      if (pm.uncertain.size() > kMaxTokenChecks) {
        single_.clear();
        single_.add(sb, se);
        g_->walk_all(single_, bits);
        any = true;
      } else {
        for (int32_t id : pm.uncertain) {
          if (test_bit(bits, id)) continue;
          if (check_token(sb, se, vocab.piece(id))) {
            set_bit(bits, id);
            any = true;
          }
        }
      }
    }
  }
  if (end || !any || failed_ || ended_) {
    for (int32_t id : vocab.eog_ids()) {
      if (id >= 0 && id < vocab.size()) set_bit(bits, id);
    }
  }
}

bool GrammarMatcher::accept(int32_t token) {
  const TokenVocab& vocab = g_->vocab();
  if (std::find(vocab.eog_ids().begin(), vocab.eog_ids().end(), token) != vocab.eog_ids().end()) {
    ended_ = true;
    return can_end();
  }
  if (failed_ || ended_ || token < 0 || token >= vocab.size() || vocab.piece(token).empty()) {
    failed_ = true;
    return false;
  }
  const Grammar& gr = g_->grammar();
  for (char c : vocab.piece(token)) {
    gr.advance(stacks_, static_cast<uint8_t>(c), &b_, &scratch_);
    if (b_.empty()) {
      failed_ = true;
      return false;
    }
    std::swap(stacks_, b_);
  }
  return true;
}

bool GrammarMatcher::accepts_bytes(std::string_view bytes) const {
  StackSet cur = stacks_, next;
  std::vector<uint32_t> scratch;
  for (char c : bytes) {
    g_->grammar().advance(cur, static_cast<uint8_t>(c), &next, &scratch);
    std::swap(cur, next);
    if (cur.empty()) return false;
  }
  return true;
}

}  // namespace hz::grammar
