#include "grammar/grammar.h"

#include <algorithm>
#include <cstring>

namespace hz::grammar {

bool StackSet::has_empty_stack() const {
  for (size_t i = 0; i < ends_.size(); ++i) {
    if (stack_size(i) == 0) return true;
  }
  return false;
}

bool StackSet::has_nonempty_stack() const {
  for (size_t i = 0; i < ends_.size(); ++i) {
    if (stack_size(i) != 0) return true;
  }
  return false;
}

uint64_t StackSet::hash() const {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ ends_.size();
  for (uint32_t v : data_) h = (h ^ v) * 0x100000001B3ULL;
  for (uint32_t v : ends_) h = (h ^ v) * 0x100000001B3ULL;
  return h;
}

uint64_t StackSet::hash_stack(const uint32_t* begin, const uint32_t* end) {
  uint64_t h = 0xCBF29CE484222325ULL ^ static_cast<uint64_t>(end - begin);
  for (const uint32_t* p = begin; p != end; ++p) h = (h ^ *p) * 0x100000001B3ULL;
  return h ^ (h >> 29);
}

void StackSet::grow_index() {
  slots_.assign(slots_.empty() ? 16 : slots_.size() * 2, 0);
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < ends_.size(); ++i) {
    size_t k = hash_stack(stack_begin(i), stack_end(i)) & mask;
    while (slots_[k] != 0) k = (k + 1) & mask;
    slots_[k] = static_cast<uint32_t>(i + 1);
  }
}

void StackSet::add(const uint32_t* begin, const uint32_t* end) {
  const size_t n = end - begin;
  if (slots_.size() < 2 * (ends_.size() + 1)) grow_index();
  const size_t mask = slots_.size() - 1;
  size_t k = hash_stack(begin, end) & mask;
  for (; slots_[k] != 0; k = (k + 1) & mask) {
    const size_t i = slots_[k] - 1;
    if (stack_size(i) == n && std::equal(begin, end, stack_begin(i))) return;
  }
  if (ends_.size() >= Grammar::kMaxStacks) return;
  data_.insert(data_.end(), begin, end);
  ends_.push_back(static_cast<uint32_t>(data_.size()));
  slots_[k] = static_cast<uint32_t>(ends_.size());
}

Status Grammar::finish() {
  rule_of_.assign(elems_.size(), 0);
  for (uint32_t r = 0; r < rules_.size(); ++r) {
    for (uint32_t start : rules_[r]) {
      for (uint32_t p = start;; ++p) {
        rule_of_[p] = r;
        if (elems_[p].kind == Element::Kind::kEnd) break;
      }
    }
  }
  reachable_.assign(rules_.size(), false);
  std::vector<uint32_t> todo{root_};
  reachable_[root_] = true;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (uint32_t start : rules_[r]) {
      for (uint32_t p = start; elems_[p].kind != Element::Kind::kEnd; ++p) {
        if (elems_[p].kind == Element::Kind::kRule && !reachable_[elems_[p].arg]) {
          reachable_[elems_[p].arg] = true;
          todo.push_back(elems_[p].arg);
        }
      }
    }
  }
  // Call sites. A tail call of a rule to itself does not count: it leaves below the same stack the
  // outer call left, so the rule's continuation is still the outer call site's.
  std::vector<int64_t> sites(rules_.size(), -1);
  std::vector<int32_t> num_sites(rules_.size(), 0);
  for (uint32_t p = 0; p < elems_.size(); ++p) {
    if (elems_[p].kind != Element::Kind::kRule || !reachable_[rule_of_[p]]) continue;
    const uint32_t r = elems_[p].arg;
    if (rule_of_[p] == r && elems_[p + 1].kind == Element::Kind::kEnd) continue;
    ++num_sites[r];
    sites[r] = p;
  }
  single_call_site_.assign(rules_.size(), -1);
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (num_sites[r] == 1 && r != root_) single_call_site_[r] = sites[r];
  }

  // Left recursion would make expansion loop: refuse it. nullable[r]: r can match "".
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (uint32_t start : rules_[r]) {
        uint32_t p = start;
        while (elems_[p].kind == Element::Kind::kRule && nullable[elems_[p].arg]) ++p;
        if (elems_[p].kind == Element::Kind::kEnd) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  // Edges r -> s where s can be reached from the start of r without matching a byte.
  std::vector<std::vector<uint32_t>> first(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (uint32_t start : rules_[r]) {
      for (uint32_t p = start; elems_[p].kind == Element::Kind::kRule; ++p) {
        first[r].push_back(elems_[p].arg);
        if (!nullable[elems_[p].arg]) break;
      }
    }
  }
  // Iterative DFS with colours (0 new, 1 on the path, 2 done).
  std::vector<uint8_t> colour(rules_.size(), 0);
  for (size_t s = 0; s < rules_.size(); ++s) {
    if (colour[s] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(s), 0}};
    colour[s] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i < first[r].size()) {
        const uint32_t t = first[r][i++];
        if (colour[t] == 1)
          return invalid_argument("grammar: rule '{}' is left-recursive (it can reach itself without matching a character; "
                                  "a repeated item that can match nothing does this too)",
                                  rule_names_[t]);
        if (colour[t] == 0) {
          colour[t] = 1;
          path.emplace_back(t, 0);
        }
      } else {
        colour[r] = 2;
        path.pop_back();
      }
    }
  }
  return Status();
}

void Grammar::expand_rec(std::vector<uint32_t>& stack, StackSet* out, size_t* steps) const {
  if (++*steps > kMaxExpandSteps) return;
  if (stack.empty()) {
    out->add(stack.data(), stack.data());
    return;
  }
  if (stack.size() > kMaxStackDepth) return;
  const uint32_t p = stack.back();
  const Element& e = elems_[p];
  if (e.kind == Element::Kind::kBytes) {
    out->add(stack.data(), stack.data() + stack.size());
    return;
  }
  // A rule reference: replace it by its continuation (when not at the end of the alternative) and
  // each alternative of the rule on top. `stack` is restored before returning.
  stack.pop_back();
  const bool cont = elems_[p + 1].kind != Element::Kind::kEnd;
  if (cont) stack.push_back(p + 1);
  for (uint32_t alt : rules_[e.arg]) {
    if (elems_[alt].kind == Element::Kind::kEnd) {
      expand_rec(stack, out, steps);
    } else {
      stack.push_back(alt);
      expand_rec(stack, out, steps);
      stack.pop_back();
    }
  }
  if (cont) stack.pop_back();
  stack.push_back(p);
}

void Grammar::expand(std::vector<uint32_t>& stack, StackSet* out) const {
  size_t steps = 0;
  expand_rec(stack, out, &steps);
}

void Grammar::initial(StackSet* out) const {
  out->clear();
  size_t steps = 0;
  std::vector<uint32_t> stack;
  for (uint32_t alt : rules_[root_]) {
    stack.clear();
    if (elems_[alt].kind != Element::Kind::kEnd) stack.push_back(alt);
    expand_rec(stack, out, &steps);
  }
}

size_t Grammar::advance_stack(const uint32_t* begin, const uint32_t* end, uint8_t b, StackSet* out,
                              std::vector<uint32_t>* scratch) const {
  if (begin == end) return 0;
  const uint32_t p = end[-1];
  if (!byte_sets_[elems_[p].arg].test(b)) return 0;
  scratch->assign(begin, end - 1);
  if (elems_[p + 1].kind != Element::Kind::kEnd) scratch->push_back(p + 1);
  size_t steps = 0;
  expand_rec(*scratch, out, &steps);
  return steps;
}

size_t Grammar::advance(const StackSet& in, uint8_t b, StackSet* out, std::vector<uint32_t>* scratch) const {
  out->clear();
  size_t steps = 0;
  for (size_t i = 0; i < in.size() && steps < kMaxAdvanceSteps; ++i) {
    steps += advance_stack(in.stack_begin(i), in.stack_end(i), b, out, scratch);
  }
  return steps;
}

bool Grammar::accepts(std::string_view text) const {
  StackSet cur, next;
  std::vector<uint32_t> scratch;
  initial(&cur);
  for (char c : text) {
    advance(cur, static_cast<uint8_t>(c), &next, &scratch);
    std::swap(cur, next);
    if (cur.empty()) return false;
  }
  return cur.has_empty_stack();
}

}  // namespace hz::grammar
