// Grammar: a GBNF-like grammar text (the form llama.cpp users know) parsed and lowered to a byte-level
// rule table, plus the stack-set matcher that walks it one byte at a time.
// Immutable after parse(); every const method is safe to call from several threads at once.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hz::grammar {

// 256-bit set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  bool operator==(const ByteSet&) const = default;
};

// One element of a rule alternative. Alternatives are stored back to back in one array, each closed
// by a kEnd element, so "the next element" of position p is always p + 1.
struct Element {
  enum class Kind : uint8_t { kEnd, kBytes, kRule };
  Kind kind = Kind::kEnd;
  uint32_t arg = 0;  // kBytes: index into byte_sets(); kRule: rule index
};

// A matcher stack: element positions, the top (next byte to match) at the back. Every stack kept in
// a StackSet has a kBytes element on top, or is empty (the grammar has been matched completely).
// StackSet holds the stacks back to back (no per-stack allocation: it is rebuilt for every byte), with
// an open-addressing index of their hashes so that adding a stack costs its length, not the set's size.
class StackSet {
 public:
  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  const uint32_t* stack_begin(size_t i) const { return data_.data() + (i == 0 ? 0 : ends_[i - 1]); }
  const uint32_t* stack_end(size_t i) const { return data_.data() + ends_[i]; }
  size_t stack_size(size_t i) const { return stack_end(i) - stack_begin(i); }
  bool has_empty_stack() const;
  bool has_nonempty_stack() const;
  void clear() {
    data_.clear();
    ends_.clear();
    std::fill(slots_.begin(), slots_.end(), 0);
  }
  // Adds a stack unless an equal one is present.
  void add(const uint32_t* begin, const uint32_t* end);
  bool operator==(const StackSet& o) const { return ends_ == o.ends_ && data_ == o.data_; }
  uint64_t hash() const;

 private:
  static uint64_t hash_stack(const uint32_t* begin, const uint32_t* end);
  void grow_index();

  std::vector<uint32_t> data_;
  std::vector<uint32_t> ends_;   // end offset of each stack in data_
  std::vector<uint32_t> slots_;  // power-of-two table of stack index + 1 (0 = free), at most half full
};

struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;
  size_t max_elements = 1 << 20;     // after lowering repetitions and character classes
  int32_t max_repetition = 10000;    // m and n of x{m,n}
  int32_t max_nesting = 128;         // parentheses
};

class Grammar {
 public:
  // Parses grammar text. The start rule is `root`. Errors name the line and column, or the rule.
  static Result<Grammar> parse(std::string_view text, const GrammarLimits& limits = {});

  // Limits that keep a hostile grammar from exhausting time or memory while matching.
  static constexpr size_t kMaxStackDepth = 1024;   // deeper nesting is not matched
  static constexpr size_t kMaxStacks = 512;        // alternatives followed at once
  static constexpr size_t kMaxExpandSteps = 20000; // per stack and byte
  static constexpr size_t kMaxAdvanceSteps = 100000; // per byte, all stacks together

  // The stacks at the start of the grammar (before any byte).
  void initial(StackSet* out) const;
  // Expands a stack whose top may be a rule reference into stacks with byte elements on top.
  void expand(std::vector<uint32_t>& stack, StackSet* out) const;
  // Advances every stack of `in` over byte `b` into `out` (cleared first). An empty `out` = rejected.
  // Returns the expansion steps taken: at most kMaxAdvanceSteps + kMaxExpandSteps, however ambiguous
  // the grammar (stacks beyond the budget are dropped, as are those beyond kMaxStacks).
  size_t advance(const StackSet& in, uint8_t b, StackSet* out, std::vector<uint32_t>* scratch) const;
  // Same for one stack, adding to `out`; returns the expansion steps it took.
  size_t advance_stack(const uint32_t* begin, const uint32_t* end, uint8_t b, StackSet* out,
                       std::vector<uint32_t>* scratch) const;
  // True when `text` is a complete sentence of the grammar (tests, tools).
  bool accepts(std::string_view text) const;

  const std::vector<Element>& elements() const { return elems_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  const std::vector<std::vector<uint32_t>>& rules() const { return rules_; }  // alternative starts
  const std::string& rule_name(uint32_t rule) const { return rule_names_[rule]; }
  uint32_t root() const { return root_; }
  // The rule each element belongs to, and the rule's single call site (see token_matcher.cc), or -1.
  uint32_t rule_of(uint32_t pos) const { return rule_of_[pos]; }
  int64_t single_call_site(uint32_t rule) const { return single_call_site_[rule]; }
  bool reachable(uint32_t rule) const { return reachable_[rule]; }

 private:
  friend class GrammarBuilder;
  void expand_rec(std::vector<uint32_t>& stack, StackSet* out, size_t* steps) const;
  Status finish();  // derived tables and the left-recursion check

  std::vector<Element> elems_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::vector<uint32_t>> rules_;
  std::vector<std::string> rule_names_;
  uint32_t root_ = 0;
  std::vector<uint32_t> rule_of_;           // [elements]
  std::vector<int64_t> single_call_site_;   // [rules]
  std::vector<bool> reachable_;             // [rules] from root
};

}  // namespace hz::grammar
