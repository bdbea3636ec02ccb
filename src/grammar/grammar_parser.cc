// Grammar::parse: GBNF-like text -> byte-level rule table.
//
// Syntax: `name ::= alternatives` rules (the start rule is `root`), `|` alternation, sequences,
// `( )` groups, `*` `+` `?` `{m}` `{m,}` `{m,n}` repetition, "string" literals, [character classes]
// with ranges, `^` negation and escapes, `.` (any character), rule references, `#` comments.
//
// Lowering: literals become one byte element per UTF-8 byte; a character class becomes alternatives
// of byte-range sequences (its ASCII part is one byte set); a group or repetition becomes a fresh
// rule per occurrence, so each has a single call site (token_matcher.cc uses that to decide most
// tokens without looking at the rest of the stack). `x*` is `R ::= x R | ""` (tail recursion: the
// matcher stack does not grow), `x{m,n}` is m copies of x followed by n - m nested optionals.
#include <algorithm>
#include <map>

#include "grammar/grammar.h"

namespace hz::grammar {
namespace {

struct Item {
  bool is_rule = false;
  uint32_t arg = 0;
};
using Seq = std::vector<Item>;
using Alts = std::vector<Seq>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t encode_utf8(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Splits the code point range [lo, hi] (no surrogates inside) into UTF-8 byte-range sequences:
// each emitted sequence [(lo_0, hi_0), ...] matches exactly the encodings of a sub-range.
template <typename F>
void split_utf8_range(uint32_t lo, uint32_t hi, F&& emit) {
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      split_utf8_range(lo, boundary, emit);
      split_utf8_range(boundary + 1, hi, emit);
      return;
    }
  }
  // Same encoded length: cut where a continuation byte would have to wrap, so that every byte
  // position of the sub-range varies independently over one interval.
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8_range(lo, lo | m, emit);
        split_utf8_range((lo | m) + 1, hi, emit);
        return;
      }
      if ((hi & m) != m) {
        split_utf8_range(lo, (hi & ~m) - 1, emit);
        split_utf8_range(hi & ~m, hi, emit);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  const size_t n = encode_utf8(lo, a);
  encode_utf8(hi, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < n; ++k) seq.emplace_back(a[k], b[k]);
  emit(seq);
}

}  // namespace

class GrammarBuilder {
 public:
  GrammarBuilder(std::string_view src, const GrammarLimits& limits) : src_(src), lim_(limits) {}

  Result<Grammar> build() {
    if (src_.size() > lim_.max_text_bytes)
      return invalid_argument("grammar: the text is {} bytes, more than the limit of {}", src_.size(),
                              lim_.max_text_bytes);
    skip_space(true);
    while (!eof()) {
      HZ_RETURN_IF_ERROR(parse_rule());
      skip_space(true);
    }
    auto root = ids_.find("root");
    if (root == ids_.end() || !defined_[root->second]) return invalid_argument("grammar: no rule named 'root'");
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (!defined_[r]) return invalid_argument("grammar: rule '{}' is used but not defined", names_[r]);
    }
    inline_small_rules(root->second);
    Grammar g;
    g.root_ = root->second;
    g.byte_sets_ = std::move(sets_);
    g.rule_names_ = std::move(names_);
    g.rules_.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Seq& seq : rules_[r]) {
        g.rules_[r].push_back(static_cast<uint32_t>(g.elems_.size()));
        for (const Item& it : seq) {
          g.elems_.push_back({it.is_rule ? Element::Kind::kRule : Element::Kind::kBytes, it.arg});
        }
        g.elems_.push_back({Element::Kind::kEnd, 0});
      }
    }
    HZ_RETURN_IF_ERROR(g.finish());
    return g;
  }

 private:
  bool eof() const { return pos_ >= src_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }

  void skip_space(bool newlines) {
    while (!eof()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  Status error(std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return invalid_argument("grammar: line {} column {}: {}", line, col, what);
  }

  Status count(size_t n) {
    num_items_ += n;
    if (num_items_ > lim_.max_elements)
      return invalid_argument("grammar: more than {} elements after expanding repetitions", lim_.max_elements);
    return Status();
  }

  // `name ::=` ahead (after optional spaces)?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < src_.size() && is_name_char(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t')) ++p;
    return src_.substr(p, 3) == "::=";
  }

  uint32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    ids_.emplace(name, id);
    names_.push_back(name);
    rules_.emplace_back();
    defined_.push_back(false);
    return id;
  }

  uint32_t fresh_rule(const Alts& alts) {
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    names_.push_back(fmt::format("{}-{}", current_, id));
    rules_.push_back(alts);
    defined_.push_back(true);
    return id;
  }

  uint32_t byte_set_id(const ByteSet& s) {
    for (size_t i = 0; i < sets_.size(); ++i) {
      if (sets_[i] == s) return static_cast<uint32_t>(i);
    }
    sets_.push_back(s);
    return static_cast<uint32_t>(sets_.size() - 1);
  }

  Status parse_rule() {
    const size_t start = pos_;
    while (!eof() && is_name_char(peek())) ++pos_;
    if (pos_ == start) return error("expected a rule name");
    std::string name(src_.substr(start, pos_ - start));
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") return error(fmt::format("expected '::=' after rule name '{}'", name));
    pos_ += 3;
    const uint32_t id = rule_id(name);
    if (defined_[id]) return error(fmt::format("rule '{}' is defined twice", name));
    current_ = name;
    Alts alts;
    HZ_RETURN_IF_ERROR(parse_alternatives(&alts, 0));
    rules_[id] = std::move(alts);
    defined_[id] = true;
    return Status();
  }

  Status parse_alternatives(Alts* out, int depth) {
    if (depth > lim_.max_nesting) return error("groups nested too deeply");
    while (true) {
      Seq seq;
      HZ_RETURN_IF_ERROR(parse_sequence(&seq, depth));
      out->push_back(std::move(seq));
      skip_space(true);
      if (peek() != '|') return Status();
      ++pos_;
    }
  }

  Status parse_sequence(Seq* seq, int depth) {
    while (true) {
      skip_space(true);
      if (eof() || peek() == '|' || peek() == ')' || at_rule_start()) return Status();
      Alts atom;
      HZ_RETURN_IF_ERROR(parse_atom(&atom, depth));
      skip_space(false);
      int min = 1, max = 1;  // max -1: unbounded
      const char c = peek();
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : -1;
      } else if (c == '{') {
        ++pos_;
        HZ_RETURN_IF_ERROR(parse_braces(&min, &max));
      }
      if (min == 1 && max == 1) {
        HZ_RETURN_IF_ERROR(append_atom(seq, atom));
      } else {
        HZ_RETURN_IF_ERROR(append_repeat(seq, atom, min, max));
      }
    }
  }

  Result<int> parse_int() {
    skip_space(false);
    const size_t start = pos_;
    int64_t v = 0;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > lim_.max_repetition) return error(fmt::format("repetition count above the limit of {}", lim_.max_repetition));
      ++pos_;
    }
    if (pos_ == start) return error("expected a number in '{m,n}'");
    skip_space(false);
    return static_cast<int>(v);
  }

  Status parse_braces(int* min, int* max) {
    HZ_ASSIGN_OR_RETURN(*min, parse_int());
    if (peek() == '}') {
      ++pos_;
      *max = *min;
      return Status();
    }
    if (peek() != ',') return error("expected ',' or '}' in '{m,n}'");
    ++pos_;
    skip_space(false);
    if (peek() == '}') {
      ++pos_;
      *max = -1;
      return Status();
    }
    HZ_ASSIGN_OR_RETURN(*max, parse_int());
    if (peek() != '}') return error("expected '}' closing '{m,n}'");
    ++pos_;
    if (*max < *min) return error("in '{m,n}' n is smaller than m");
    return Status();
  }

  Status parse_atom(Alts* atom, int depth) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      Seq seq;
      while (true) {
        if (eof() || peek() == '\n') return error("unterminated string literal");
        if (peek() == '"') {
          ++pos_;
          break;
        }
        uint32_t cp;
        HZ_ASSIGN_OR_RETURN(cp, read_char());
        uint8_t buf[4];
        const size_t n = encode_utf8(cp, buf);
        for (size_t k = 0; k < n; ++k) {
          ByteSet s;
          s.set(buf[k]);
          seq.push_back({false, byte_set_id(s)});
        }
      }
      HZ_RETURN_IF_ERROR(count(seq.size()));
      atom->push_back(std::move(seq));
      return Status();
    }
    if (c == '[') {
      ++pos_;
      return parse_class(atom);
    }
    if (c == '.') {
      ++pos_;
      return class_alts({{0, kMaxCodePoint}}, false, atom);
    }
    if (c == '(') {
      ++pos_;
      HZ_RETURN_IF_ERROR(parse_alternatives(atom, depth + 1));
      skip_space(true);
      if (peek() != ')') return error("expected ')'");
      ++pos_;
      return Status();
    }
    if (is_name_char(c)) {
      const size_t start = pos_;
      while (!eof() && is_name_char(peek())) ++pos_;
      const uint32_t id = rule_id(std::string(src_.substr(start, pos_ - start)));
      HZ_RETURN_IF_ERROR(count(1));
      atom->push_back({{true, id}});
      return Status();
    }
    return error(fmt::format("unexpected character '{}'", c));
  }

  // One character of a literal or class at pos_: an escape or a UTF-8 character of the source.
  Result<uint32_t> read_char() {
    const uint8_t c = static_cast<uint8_t>(peek());
    if (c == '\\') {
      ++pos_;
      if (eof()) return error("'\\' at the end of the text");
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 't': return uint32_t{'\t'};
        case 'r': return uint32_t{'\r'};
        case '0': return uint32_t{0};
        case 'x': return read_hex(2);
        case 'u': return read_hex(4);
        case 'U': return read_hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': case '.':
          return static_cast<uint32_t>(e);
        default:
          --pos_;
          return error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && (c < 0xC2 || c > 0xF4)) return error("invalid UTF-8 in the grammar text");
    if (pos_ + len > src_.size()) return error("truncated UTF-8 in the grammar text");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      const uint8_t d = static_cast<uint8_t>(src_[pos_ + k]);
      if ((d & 0xC0) != 0x80) return error("invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (d & 0x3F);
    }
    pos_ += len;
    return cp;
  }

  Result<uint32_t> read_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = hex_value(peek());
      if (h < 0) return error(fmt::format("expected {} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return error("escape is not a Unicode scalar value");
    return v;
  }

  Status parse_class(Alts* atom) {
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (true) {
      if (eof()) return error("unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      uint32_t lo, hi;
      HZ_ASSIGN_OR_RETURN(lo, read_char());
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        HZ_ASSIGN_OR_RETURN(hi, read_char());
        if (hi < lo) return error("character range is reversed");
      }
      ranges.emplace_back(lo, hi);
    }
    return class_alts(std::move(ranges), negate, atom);
  }

  Status class_alts(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate, Alts* atom) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    if (negate) {
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (const auto& r : merged) {
        if (r.first > next) inv.emplace_back(next, r.first - 1);
        next = r.second + 1;
      }
      if (next <= kMaxCodePoint) inv.emplace_back(next, kMaxCodePoint);
      merged = std::move(inv);
    }
    // Surrogates are not characters: no valid UTF-8 encodes them.
    std::vector<std::pair<uint32_t, uint32_t>> valid;
    for (const auto& r : merged) {
      if (r.second < 0xD800 || r.first > 0xDFFF) {
        valid.push_back(r);
        continue;
      }
      if (r.first < 0xD800) valid.emplace_back(r.first, 0xD7FF);
      if (r.second > 0xDFFF) valid.emplace_back(0xE000, r.second);
    }
    ByteSet ascii;
    bool any_ascii = false;
    Alts multi;
    for (const auto& r : valid) {
      split_utf8_range(r.first, r.second, [&](const std::vector<std::pair<uint8_t, uint8_t>>& seq) {
        if (seq.size() == 1) {
          for (uint32_t b = seq[0].first; b <= seq[0].second; ++b) ascii.set(static_cast<uint8_t>(b));
          any_ascii = true;
          return;
        }
        Seq s;
        for (const auto& [lo, hi] : seq) {
          ByteSet set;
          for (uint32_t b = lo; b <= hi; ++b) set.set(static_cast<uint8_t>(b));
          s.push_back({false, byte_set_id(set)});
        }
        multi.push_back(std::move(s));
      });
    }
    if (any_ascii) atom->push_back({{false, byte_set_id(ascii)}});
    for (auto& s : multi) atom->push_back(std::move(s));
    if (atom->empty()) return error("character class matches no character");
    size_t n = 0;
    for (const auto& s : *atom) n += s.size();
    return count(n);
  }

  // Appends one occurrence of an atom: inline when it has one alternative, else a fresh rule.
  Status append_atom(Seq* seq, const Alts& atom) {
    if (atom.size() == 1) {
      HZ_RETURN_IF_ERROR(count(atom[0].size()));
      seq->insert(seq->end(), atom[0].begin(), atom[0].end());
      return Status();
    }
    size_t n = 1;
    for (const auto& s : atom) n += s.size();
    HZ_RETURN_IF_ERROR(count(n));
    seq->push_back({true, fresh_rule(atom)});
    return Status();
  }

  Status append_repeat(Seq* seq, const Alts& atom, int min, int max) {
    for (int k = 0; k < min; ++k) HZ_RETURN_IF_ERROR(append_atom(seq, atom));
    size_t atom_items = 0;
    for (const auto& s : atom) atom_items += s.size() + 1;
    if (max < 0) {
      // R ::= x R | "" with x's alternatives inlined.
      const uint32_t r = fresh_rule({});
      Alts alts = atom;
      for (auto& s : alts) s.push_back({true, r});
      alts.emplace_back();
      HZ_RETURN_IF_ERROR(count(atom_items + 1));
      rules_[r] = std::move(alts);
      seq->push_back({true, r});
      return Status();
    }
    // O_1 ::= x | "" ; O_k ::= x O_{k-1} | "". A multi-alternative x gets a rule per copy so
    // that each O_k keeps a single call site.
    int64_t prev = -1;
    for (int k = 0; k < max - min; ++k) {
      Seq body;
      HZ_RETURN_IF_ERROR(append_atom(&body, atom));
      if (prev >= 0) body.push_back({true, static_cast<uint32_t>(prev)});
      HZ_RETURN_IF_ERROR(count(2));
      prev = fresh_rule({std::move(body), Seq{}});
    }
    if (prev >= 0) seq->push_back({true, static_cast<uint32_t>(prev)});
    return Status();
  }

  // Small non-recursive rules used in several places (whitespace, a JSON string) get a copy per call
  // site: a position in a rule with a single call site knows what follows it, so the token masks
  // of token_matcher.cc decide nearly every token ahead of time.
  void inline_small_rules(uint32_t root) {
    constexpr size_t kInlineMaxItems = 160;
    const size_t n = rules_.size();
    // Tarjan's strongly connected components (iterative): recursive = on a cycle.
    std::vector<int32_t> index(n, -1), low(n, 0);
    // A rule whose only recursion is a reference to itself (x* lowers so) can still be copied.
    std::vector<bool> on_stack(n, false), recursive(n, false), self_loop(n, false);
    std::vector<uint32_t> stack, order;  // order: rules in reverse topological order (callees first)
    int32_t next_index = 0;
    auto refs = [&](uint32_t r) {
      std::vector<uint32_t> out;
      for (const Seq& seq : rules_[r]) {
        for (const Item& it : seq) {
          if (it.is_rule) out.push_back(it.arg);
        }
      }
      return out;
    };
    for (uint32_t s0 = 0; s0 < n; ++s0) {
      if (index[s0] >= 0) continue;
      struct Frame {
        uint32_t r;
        std::vector<uint32_t> succ;
        size_t i;
      };
      std::vector<Frame> dfs;
      auto push = [&](uint32_t r) {
        index[r] = low[r] = next_index++;
        stack.push_back(r);
        on_stack[r] = true;
        dfs.push_back({r, refs(r), 0});
      };
      push(s0);
      while (!dfs.empty()) {
        Frame& f = dfs.back();
        if (f.i < f.succ.size()) {
          const uint32_t t = f.succ[f.i++];
          if (t == f.r) {
            self_loop[t] = true;
            continue;
          }
          if (index[t] < 0) {
            push(t);
          } else if (on_stack[t]) {
            low[f.r] = std::min(low[f.r], index[t]);
          }
          continue;
        }
        const uint32_t r = f.r;
        if (low[r] == index[r]) {
          std::vector<uint32_t> comp;
          while (true) {
            const uint32_t t = stack.back();
            stack.pop_back();
            on_stack[t] = false;
            comp.push_back(t);
            if (t == r) break;
          }
          if (comp.size() > 1) {
            for (uint32_t t : comp) recursive[t] = true;
          }
          order.insert(order.end(), comp.begin(), comp.end());
        }
        dfs.pop_back();
        if (!dfs.empty()) low[dfs.back().r] = std::min(low[dfs.back().r], low[r]);
      }
    }
    // Expanded size of each non-recursive rule (callees first).
    std::vector<size_t> size(n, SIZE_MAX);
    for (uint32_t r : order) {
      if (recursive[r]) continue;
      size_t total = 0;
      for (const Seq& seq : rules_[r]) {
        for (const Item& it : seq) total += it.is_rule && it.arg != r && size[it.arg] != SIZE_MAX ? size[it.arg] : 1;
        ++total;
      }
      size[r] = total;
    }
    std::vector<uint32_t> callers(n, 0);
    size_t items = 0;
    for (uint32_t r = 0; r < n; ++r) {
      for (const Seq& seq : rules_[r]) {
        items += seq.size() + 1;
        for (const Item& it : seq) {
          if (it.is_rule && it.arg != r) ++callers[it.arg];
        }
      }
    }
    const size_t budget = std::min(lim_.max_elements, items * 8 + 20000);
    for (uint32_t r = 0; r < rules_.size(); ++r) {  // clones are appended and visited too
      for (size_t a = 0; a < rules_[r].size(); ++a) {
        for (size_t i = 0; i < rules_[r][a].size(); ++i) {
          const Item it = rules_[r][a][i];
          if (!it.is_rule || it.arg == r || it.arg == root || recursive[it.arg] || callers[it.arg] < 2 || size[it.arg] > kInlineMaxItems ||
              items + size[it.arg] > budget)
            continue;
          const uint32_t s = it.arg;
          const uint32_t copy = static_cast<uint32_t>(rules_.size());
          Alts alts = rules_[s];
          names_.push_back(fmt::format("{}-i{}", names_[s], copy));
          rules_.push_back(std::move(alts));
          defined_.push_back(true);
          recursive.push_back(false);
          size.push_back(size[s]);
          callers.push_back(1);
          --callers[s];
          for (Seq& seq : rules_[copy]) {
            items += seq.size() + 1;
            for (Item& x : seq) {
              if (!x.is_rule) continue;
              if (x.arg == s) {
                x.arg = copy;  // a self-reference stays inside the copy
              } else {
                ++callers[x.arg];
              }
            }
          }
          rules_[r][a][i].arg = copy;
        }
      }
    }
  }

  std::string_view src_;
  GrammarLimits lim_;
  size_t pos_ = 0;
  size_t num_items_ = 0;
  std::string current_;  // rule being parsed, names fresh rules
  std::vector<Alts> rules_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::map<std::string, uint32_t, std::less<>> ids_;
  std::vector<ByteSet> sets_;
};

Result<Grammar> Grammar::parse(std::string_view text, const GrammarLimits& limits) {
  return GrammarBuilder(text, limits).build();
}

}  // namespace hz::grammar
