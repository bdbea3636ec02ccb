#include "grammar/json_schema.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bitset>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>

namespace hz::grammar {
namespace {

constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxRules = 20000;
constexpr int64_t kMaxRepeat = 10000;

// Shared rules every schema grammar may use.
constexpr const char* kCommonRules = R"g(ws ::= (" " | "\n" [ ]{0,16})?
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-integer ::= "-"? ("0" | [1-9] [0-9]{0,18})
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-string ws ":" ws json-value ws ("," ws json-string ws ":" ws json-value ws)*)? "}"
json-array ::= "[" ws (json-value ws ("," ws json-value ws)*)? "]"
)g";

// A JSON text as a grammar literal.
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool is_annotation(const std::string& key) {
  static const std::set<std::string> kIgnored = {"title", "description", "$schema", "$id", "$comment", "default", "examples"};
  return kIgnored.count(key) != 0;
}

// Decimal digit strings a <= b of the same length -> grammar alternatives matching exactly [a, b].
void same_length_range(const std::string& a, const std::string& b, const std::string& prefix, std::vector<std::string>* out) {
  const size_t n = a.size();
  if (a == b) {
    out->push_back(prefix + literal(a));
    return;
  }
  if (a[0] == b[0]) {
    same_length_range(a.substr(1), b.substr(1), prefix + literal(std::string(1, a[0])) + " ", out);
    return;
  }
  const std::string rest_digits = n > 1 ? fmt::format(" [0-9]{{{}}}", n - 1) : "";
  const bool a_low = a.find_first_not_of('0', 1) == std::string::npos;   // a = d000..
  const bool b_high = b.find_first_not_of('9', 1) == std::string::npos;  // b = d999..
  char mid_lo = a_low ? a[0] : static_cast<char>(a[0] + 1);
  char mid_hi = b_high ? b[0] : static_cast<char>(b[0] - 1);
  if (!a_low) same_length_range(a.substr(1), std::string(n - 1, '9'), prefix + literal(std::string(1, a[0])) + " ", out);
  if (mid_lo <= mid_hi) out->push_back(prefix + fmt::format("[{}-{}]", mid_lo, mid_hi) + rest_digits);
  if (!b_high) same_length_range(std::string(n - 1, '0'), b.substr(1), prefix + literal(std::string(1, b[0])) + " ", out);
}

// Alternatives for the decimal forms (no sign, no leading zeros) of [lo, hi]; hi empty = unbounded.
void natural_range(uint64_t lo, std::optional<uint64_t> hi, std::vector<std::string>* out) {
  const std::string ls = std::to_string(lo);
  const size_t ld = ls.size();
  const size_t hd = hi ? std::to_string(*hi).size() : ld;
  for (size_t d = ld; d <= hd && d <= 19; ++d) {
    const std::string a = d == ld ? ls : "1" + std::string(d - 1, '0');
    std::string b = std::string(d, '9');
    if (hi && d == hd) b = std::to_string(*hi);
    if (a.size() == b.size() && a <= b) same_length_range(a, b, "", out);
  }
  if (!hi && ld < 19) out->push_back(fmt::format("[1-9] [0-9]{{{},18}}", ld));
}

// One character as a JSON string's text holds it ('"' and '\' escaped), as a grammar literal.
std::string json_char_literal(char c) {
  if (c == '"') return R"("\\\"")";
  if (c == '\\') return R"("\\\\")";
  return literal(std::string(1, c));
}

// Regular expression (pattern) -> grammar expression over a JSON string's text.
class RegexTranslator {
 public:
  explicit RegexTranslator(std::string_view re) : re_(re) {}

  Result<std::string> translate() {
    bool start = false, end = false;
    std::string_view body = re_;
    if (!body.empty() && body.front() == '^') {
      start = true;
      body.remove_prefix(1);
    }
    if (!body.empty() && body.back() == '$' && (body.size() < 2 || body[body.size() - 2] != '\\')) {
      end = true;
      body.remove_suffix(1);
    }
    re_ = body;
    HZ_ASSIGN_OR_RETURN(std::string e, alternation(0));
    if (i_ != re_.size()) return fail("unbalanced ')'");
    return std::string(start ? "" : "json-char* ") + "(" + e + ")" + (end ? "" : " json-char*");
  }

 private:
  Status fail(const std::string& what) const {
    return invalid_argument("pattern: {} at offset {} (supported: literals, \\d \\w \\s, classes, '.', groups, '|', "
                            "* + ? {{n,m}}, ^ and $ at the ends)", what, i_);
  }

  Result<std::string> alternation(int depth) {
    if (depth > 32) return fail("groups nested too deep");
    std::string out;
    HZ_ASSIGN_OR_RETURN(out, sequence(depth));
    while (i_ < re_.size() && re_[i_] == '|') {
      ++i_;
      std::string next;
      HZ_ASSIGN_OR_RETURN(next, sequence(depth));
      out += " | " + next;
    }
    return out;
  }

  Result<std::string> sequence(int depth) {
    std::string out;
    while (i_ < re_.size() && re_[i_] != '|' && re_[i_] != ')') {
      std::string a;
      HZ_ASSIGN_OR_RETURN(a, atom(depth));
      HZ_ASSIGN_OR_RETURN(a, quantified(a));
      out += (out.empty() ? "" : " ") + a;
    }
    return out.empty() ? std::string("\"\"") : out;
  }

  Result<std::string> quantified(const std::string& a) {
    if (i_ >= re_.size()) return a;
    const char q = re_[i_];
    std::string out;
    if (q == '*' || q == '+' || q == '?') {
      ++i_;
      out = "(" + a + ")" + std::string(1, q);
    } else if (q == '{') {
      const size_t close = re_.find('}', i_);
      if (close == std::string_view::npos) return fail("'{' without '}'");
      const std::string inner(re_.substr(i_ + 1, close - i_ - 1));
      int64_t lo = 0, hi = -1;
      const size_t comma = inner.find(',');
      auto num = [&](const std::string& t, int64_t* v) {
        if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos) return false;
        *v = std::stoll(t);
        return *v <= kMaxRepeat;
      };
      if (comma == std::string::npos) {
        if (!num(inner, &lo)) return fail("bad repetition");
        hi = lo;
      } else if (!num(inner.substr(0, comma), &lo) || (comma + 1 < inner.size() && !num(inner.substr(comma + 1), &hi))) {
        return fail("bad repetition");
      }
      if (hi >= 0 && hi < lo) return fail("repetition {n,m} with m < n");
      i_ = close + 1;
      out = "(" + a + ")" + (hi < 0 ? fmt::format("{{{},}}", lo) : fmt::format("{{{},{}}}", lo, hi));
    } else {
      return a;
    }
    if (i_ < re_.size() && re_[i_] == '?') ++i_;  // lazy: the same strings
    if (i_ < re_.size() && (re_[i_] == '*' || re_[i_] == '+' || re_[i_] == '?' || re_[i_] == '{'))
      return fail("a quantifier after a quantifier");
    return out;
  }

  Result<std::string> atom(int depth) {
    const char c = re_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < re_.size() && re_[i_] == '?') {
        if (i_ + 1 < re_.size() && re_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          return fail("lookarounds and named groups are not supported");
        }
      }
      std::string inner;
      HZ_ASSIGN_OR_RETURN(inner, alternation(depth + 1));
      if (i_ >= re_.size() || re_[i_] != ')') return fail("'(' without ')'");
      ++i_;
      return "(" + inner + ")";
    }
    if (c == '[') return char_class();
    if (c == '.') {  // any character, as written in JSON (escapes included)
      ++i_;
      return std::string("json-char");
    }
    if (c == '^' || c == '$') return fail("'^' and '$' are supported only at the ends");
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail("a quantifier with nothing to repeat");
    if (c == '\\') return escape();
    if (static_cast<unsigned char>(c) < 0x20) return fail("a control character");
    if (static_cast<unsigned char>(c) >= 0x80) {  // one whole UTF-8 character (the JSON text was valid UTF-8)
      const auto lead = static_cast<unsigned char>(c);
      const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
      if (len == 0 || i_ + len > re_.size()) return fail("a broken UTF-8 character");
      for (size_t k = 1; k < len; ++k) {
        if ((static_cast<unsigned char>(re_[i_ + k]) & 0xC0) != 0x80) return fail("a broken UTF-8 character");
      }
      const std::string ch(re_.substr(i_, len));
      i_ += len;
      return literal(ch);
    }
    ++i_;
    return json_char_literal(c);
  }

  // \d \w \s and their negations as classes; other escapes are the character itself.
  Result<std::string> escape() {
    if (i_ + 1 >= re_.size()) return fail("a trailing '\\'");
    const char e = re_[i_ + 1];
    i_ += 2;
    switch (e) {
      case 'd': return std::string("[0-9]");
      case 'w': return std::string("[A-Za-z0-9_]");
      case 's': return std::string("\" \"");
      case 'D': return std::string(R"([^0-9"\\\x00-\x1F])");
      case 'W': return std::string(R"([^A-Za-z0-9_"\\\x00-\x1F])");
      case 'S': return std::string(R"([^ "\\\x00-\x1F])");
      default: break;
    }
    if (static_cast<unsigned char>(e) >= 0x80 || static_cast<unsigned char>(e) < 0x20)
      return fail("an escaped control or non-ASCII character");
    if (std::isalnum(static_cast<unsigned char>(e))) return fail(fmt::format("the escape '\\{}'", e));
    return json_char_literal(e);
  }

  // [...] / [^...] over ASCII: ranges and escapes. The JSON text holds '"' and '\' escaped and no
  // control characters, so those become their escapes or are left out; a negated class also takes
  // every non-ASCII character.
  Result<std::string> char_class() {
    ++i_;
    bool negated = false;
    if (i_ < re_.size() && re_[i_] == '^') {
      negated = true;
      ++i_;
    }
    std::bitset<128> in;
    bool first = true;
    auto take = [&](char* ch) -> Status {
      const char c = re_[i_];
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80)
        return fail("a class with a control or non-ASCII character");
      ++i_;
      if (c != '\\') {
        *ch = c;
        return Status();
      }
      if (i_ >= re_.size()) return fail("a trailing '\\'");
      const char e = re_[i_++];
      if (e == 'd' || e == 'w' || e == 's') {
        *ch = 0;  // a set, added by the caller
        for (int k = 0; k < 128; ++k) {
          const bool m = e == 'd' ? std::isdigit(k) : e == 'w' ? (std::isalnum(k) || k == '_') : k == ' ';
          if (m) in.set(k);
        }
        return Status();
      }
      if (std::isalnum(static_cast<unsigned char>(e))) return fail(fmt::format("the escape '\\{}' in a class", e));
      *ch = e;
      return Status();
    };
    while (i_ < re_.size() && (re_[i_] != ']' || first)) {
      first = false;
      char lo = 0;
      HZ_RETURN_IF_ERROR(take(&lo));
      if (lo != 0 && i_ + 1 < re_.size() && re_[i_] == '-' && re_[i_ + 1] != ']') {
        ++i_;
        char hi = 0;
        HZ_RETURN_IF_ERROR(take(&hi));
        if (hi == 0 || hi < lo) return fail("a bad range in a class");
        for (int k = lo; k <= hi; ++k) in.set(k);
      } else if (lo != 0) {
        in.set(static_cast<unsigned char>(lo));
      }
    }
    if (i_ >= re_.size()) return fail("'[' without ']'");
    ++i_;
    // The raw characters (printable ASCII but '"' and '\'), as ranges.
    std::bitset<128> raw = negated ? ~in : in;
    auto ranges = [](const std::bitset<128>& b) {
      std::string out;
      for (int k = 0x20; k < 128;) {
        if (!b.test(k) || k == '"' || k == '\\' || k == 0x7F) {
          ++k;
          continue;
        }
        int j = k;
        while (j + 1 < 127 && b.test(j + 1) && j + 1 != '"' && j + 1 != '\\') ++j;
        auto esc = [](int c) { return (c == ']' || c == '[' || c == '-' || c == '^') ? std::string("\\") + static_cast<char>(c) : std::string(1, static_cast<char>(c)); };
        out += esc(k);
        if (j > k) out += "-" + esc(j);
        k = j + 1;
      }
      return out;
    };
    std::vector<std::string> alts;
    if (negated) {
      // Everything but the class: non-ASCII too. The excluded ASCII characters are listed.
      std::string excluded;
      for (int k = 0x20; k < 128; ++k) {
        if (in.test(k) && k != '"' && k != '\\') excluded += ranges(std::bitset<128>().set(k));
      }
      alts.push_back("[^" + excluded + R"("\\\x00-\x1F\x7F])");
    } else {
      const std::string r = ranges(raw);
      if (!r.empty()) alts.push_back("[" + r + "]");
    }
    if (raw.test('"')) alts.push_back(R"("\\\"")");
    if (raw.test('\\')) alts.push_back(R"("\\\\")");
    if (alts.empty()) return fail("a class that matches no character a JSON string can hold");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

  std::string_view re_;
  size_t i_ = 0;
};

template <typename json>
class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  Result<std::string> compile() {
    std::string root_ref;
    HZ_ASSIGN_OR_RETURN(root_ref, visit(root_, "", "root-value", 0));
    std::string out = "root ::= \" \"? " + root_ref + "\n";  // SentencePiece models start with "▁{"
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out + kCommonRules;
  }

 private:
  Status error(const std::string& path, const std::string& what) const {
    return invalid_argument("json_schema: {} at '{}'", what, path.empty() ? "/" : path);
  }

  std::string fresh(const std::string& hint) {
    std::string name;
    for (char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (name.empty()) name = "v";
    return fmt::format("s{}-{}", next_id_++, name.substr(0, 40));
  }

  Result<std::string> add_rule(const std::string& hint, std::string body) {
    if (rules_.size() >= kMaxRules) return invalid_argument("json_schema: the schema needs more than {} grammar rules", kMaxRules);
    std::string name = fresh(hint);
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  // Returns a grammar expression (usually a rule name) for the values valid under `s`.
  Result<std::string> visit(const json& s, const std::string& path, const std::string& hint, int depth) {
    if (depth > kMaxSchemaDepth) return error(path, fmt::format("schema nested deeper than {} levels", kMaxSchemaDepth));
    if (s.is_boolean()) {
      if (s.template get<bool>()) return std::string("json-value");
      return error(path, "the schema 'false' matches nothing");
    }
    if (!s.is_object()) return error(path, "a schema must be an object");
    static const std::set<std::string> kKnown = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                                 "items", "minItems", "maxItems", "minLength", "maxLength", "minimum",
                                                 "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "$defs",
                                                 "definitions", "$ref", "pattern", "format"};
    for (const auto& [key, value] : s.items()) {
      if (kKnown.count(key) == 0 && !is_annotation(key))
        return error(path, fmt::format("unsupported keyword '{}'", key));
    }
    if (s.contains("$ref")) {
      if (s.size() > 1) {
        for (const auto& [key, value] : s.items()) {
          if (key != "$ref" && !is_annotation(key) && key != "$defs" && key != "definitions")
            return error(path, fmt::format("keyword '{}' next to '$ref' is not supported", key));
        }
      }
      return resolve_ref(s["$ref"], path, depth);
    }
    if (s.contains("const")) return literal(s["const"].dump());
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) return error(path + "/enum", "'enum' must be a non-empty array");
      std::string body;
      for (const auto& v : e) body += (body.empty() ? "" : " | ") + literal(v.dump());
      return add_rule(hint, body);
    }
    if (s.contains("anyOf")) {
      const json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) return error(path + "/anyOf", "'anyOf' must be a non-empty array");
      std::string body;
      for (size_t i = 0; i < a.size(); ++i) {
        std::string e;
        HZ_ASSIGN_OR_RETURN(e, visit(a[i], path + "/anyOf/" + std::to_string(i), hint, depth + 1));
        body += (body.empty() ? "" : " | ") + e;
      }
      return add_rule(hint, body);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.template get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) return error(path + "/type", "'type' entries must be strings");
          types.push_back(x.template get<std::string>());
        }
      } else {
        return error(path + "/type", "'type' must be a string or an array of strings");
      }
    } else if (s.contains("properties")) {
      types.push_back("object");
    } else if (s.contains("items")) {
      types.push_back("array");
    } else {
      return std::string("json-value");
    }
    std::string body;
    for (const std::string& t : types) {
      std::string e;
      HZ_ASSIGN_OR_RETURN(e, visit_type(s, t, path, hint, depth));
      body += (body.empty() ? "" : " | ") + e;
    }
    return types.size() == 1 ? body : add_rule(hint, body);
  }

  Result<std::string> visit_type(const json& s, const std::string& t, const std::string& path, const std::string& hint,
                                 int depth) {
    auto refuse_others = [&](std::initializer_list<const char*> allowed) -> Status {
      static const std::set<std::string> kTyped = {"properties", "required", "additionalProperties", "items", "minItems",
                                                   "maxItems", "minLength", "maxLength", "minimum", "maximum",
                                                   "exclusiveMinimum", "exclusiveMaximum", "pattern", "format"};
      for (const auto& item : s.items()) {
        const std::string& key = item.key();  // not a structured binding: clang 14 cannot capture one
        if (kTyped.count(key) == 0) continue;
        if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) == allowed.end())
          return error(path, fmt::format("keyword '{}' is not supported for type '{}'", key, t));
      }
      return Status();
    };
    if (t == "string") {
      HZ_RETURN_IF_ERROR(refuse_others({"minLength", "maxLength", "pattern", "format"}));
      const int shapes = s.contains("pattern") + s.contains("format") + (s.contains("minLength") || s.contains("maxLength"));
      if (shapes > 1) return error(path, "give one of 'pattern', 'format' and 'minLength'/'maxLength' on a string");
      if (s.contains("pattern")) return pattern_rule(s["pattern"], path + "/pattern", hint);
      if (s.contains("format")) return format_rule(s["format"], path + "/format", hint);
      if (!s.contains("minLength") && !s.contains("maxLength")) return std::string("json-string");
      int64_t lo = 0, hi = -1;
      HZ_ASSIGN_OR_RETURN(lo, count_keyword(s, "minLength", path, 0));
      HZ_ASSIGN_OR_RETURN(hi, count_keyword(s, "maxLength", path, -1));
      if (hi >= 0 && hi < lo) return error(path, "'maxLength' is smaller than 'minLength'");
      return add_rule(hint, hi < 0 ? fmt::format("\"\\\"\" json-char{{{},}} \"\\\"\"", lo)
                                   : fmt::format("\"\\\"\" json-char{{{},{}}} \"\\\"\"", lo, hi));
    }
    if (t == "integer") {
      HZ_RETURN_IF_ERROR(refuse_others({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}));
      if (!has_bounds(s)) return std::string("json-integer");
      return integer_range(s, path, hint);
    }
    if (t == "number") {
      HZ_RETURN_IF_ERROR(refuse_others({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}));
      if (!has_bounds(s)) return std::string("json-number");
      return number_range(s, path, hint);
    }
    if (t == "boolean") {
      HZ_RETURN_IF_ERROR(refuse_others({}));
      return std::string("json-boolean");
    }
    if (t == "null") {
      HZ_RETURN_IF_ERROR(refuse_others({}));
      return std::string("json-null");
    }
    if (t == "array") {
      HZ_RETURN_IF_ERROR(refuse_others({"items", "minItems", "maxItems"}));
      std::string item = "json-value";
      if (s.contains("items")) {
        HZ_ASSIGN_OR_RETURN(item, visit(s["items"], path + "/items", hint + "-item", depth + 1));
      }
      int64_t lo = 0, hi = -1;
      HZ_ASSIGN_OR_RETURN(lo, count_keyword(s, "minItems", path, 0));
      HZ_ASSIGN_OR_RETURN(hi, count_keyword(s, "maxItems", path, -1));
      if (hi >= 0 && hi < lo) return error(path, "'maxItems' is smaller than 'minItems'");
      if (hi == 0) return add_rule(hint, "\"[\" ws \"]\"");
      const std::string more = "(\",\" ws " + item + " ws)";
      const std::string reps = hi < 0 ? fmt::format("{{{},}}", std::max<int64_t>(lo - 1, 0))
                                      : fmt::format("{{{},{}}}", std::max<int64_t>(lo - 1, 0), hi - 1);
      const std::string list = item + " ws " + more + reps;
      return add_rule(hint, lo == 0 ? "\"[\" ws (" + list + ")? \"]\"" : "\"[\" ws " + list + " \"]\"");
    }
    if (t == "object") {
      HZ_RETURN_IF_ERROR(refuse_others({"properties", "required", "additionalProperties"}));
      return object(s, path, hint, depth);
    }
    return error(path + "/type", fmt::format("unsupported type '{}'", t));
  }

  // Integer-valued bounds of a number: its integer part ranges over naturals, with any fraction
  // between the bounds, none at an inclusive upper one and a nonzero one at an exclusive lower one
  // (no exponent), so every value written is within the bounds. Each sign is a range of magnitudes.
  Result<std::string> number_range(const json& s, const std::string& path, const std::string& hint) {
    Bounds b;
    HZ_ASSIGN_OR_RETURN(b, read_bounds(s, path, 1e15, "1e15", /*integers_only=*/true));
    std::vector<std::string> alts;
    // Values >= 0: magnitude from max(lo, 0) (inclusive below 0) up to hi.
    if (!b.hi || *b.hi > 0 || (*b.hi == 0 && !b.hi_excl)) {
      const bool lo_pos = b.lo && *b.lo >= 0;
      magnitudes("", lo_pos ? static_cast<uint64_t>(*b.lo) : 0, lo_pos ? !b.lo_excl : true,
                 b.hi ? std::optional<uint64_t>(static_cast<uint64_t>(*b.hi)) : std::nullopt, !b.hi_excl, &alts);
    }
    // Values < 0: magnitude above 0 (or -hi when hi < 0) up to -lo.
    if (!b.lo || *b.lo < 0) {
      const bool hi_neg = b.hi && *b.hi < 0;
      magnitudes("\"-\" ", hi_neg ? static_cast<uint64_t>(-*b.hi) : 0, hi_neg ? !b.hi_excl : false,
                 b.lo ? std::optional<uint64_t>(static_cast<uint64_t>(-*b.lo)) : std::nullopt, !b.lo_excl, &alts);
    }
    if (alts.empty()) return error(path, "no number lies within these bounds");
    return add_rule(hint, join_alternatives(alts));
  }

  // Alternatives for the decimals (integer part, optional fraction) whose value m has a <= m
  // (a < m when !a_incl) and m <= b (m < b when !b_incl; b empty: unbounded), after `sign`.
  static void magnitudes(const std::string& sign, uint64_t a, bool a_incl, std::optional<uint64_t> b, bool b_incl,
                         std::vector<std::string>* alts) {
    const std::string frac = " (\".\" [0-9]{1,16})?";
    const std::string nonzero_frac = " \".\" [0-9]{0,15} [1-9] [0-9]{0,15}";
    if (b && *b < a) return;
    if (b && *b == a) {
      if (a_incl && b_incl) add_naturals(sign, a, a, "", alts);
      return;
    }
    add_naturals(sign, a, a, a_incl ? frac : nonzero_frac, alts);  // a itself, or just above it
    if (!b) {
      add_naturals(sign, a + 1, std::nullopt, frac, alts);
    } else if (*b >= a + 2) {
      add_naturals(sign, a + 1, *b - 1, frac, alts);
    }
    if (b && b_incl) add_naturals(sign, *b, *b, "", alts);
  }

  // String formats: the common ones of OpenAI's structured outputs, written as RFC 3339 / 4122 say.
  Result<std::string> format_rule(const json& f, const std::string& path, const std::string& hint) {
    if (!f.is_string()) return error(path, "'format' must be a string");
    const std::string name = f.template get<std::string>();
    static const char* const kDate = R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))";
    static const char* const kTime =
        R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
    std::string body;
    if (name == "date") {
      body = std::string("(") + kDate + ")";
    } else if (name == "time") {
      body = std::string("(") + kTime + ")";
    } else if (name == "date-time") {
      body = std::string("(") + kDate + ") \"T\" (" + kTime + ")";
    } else if (name == "uuid") {
      body = R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})";
    } else if (name == "email") {
      body = R"([A-Za-z0-9._%+-]{1,64} "@" [A-Za-z0-9-]{1,63} ("." [A-Za-z0-9-]{1,63}){1,8})";
    } else if (name == "ipv4") {
      const char* octet = R"(("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]))";
      body = fmt::format("{0} \".\" {0} \".\" {0} \".\" {0}", octet);
    } else {
      return error(path, fmt::format("format '{}' is not supported (date, time, date-time, uuid, email, ipv4)", name));
    }
    return add_rule(hint, "\"\\\"\" " + body + " \"\\\"\"");
  }

  // `pattern`: a regular expression (the ECMA-262 subset schemas use: literals, escapes \d \w \s and
  // their negations, classes, '.', groups, alternation, * + ? {n,m}, ^ and $ at the ends) over the
  // string's characters. Unanchored ends allow any text there, as JSON Schema patterns match anywhere.
  Result<std::string> pattern_rule(const json& p, const std::string& path, const std::string& hint) {
    if (!p.is_string()) return error(path, "'pattern' must be a string");
    const std::string re = p.template get<std::string>();
    if (re.size() > 4096) return error(path, "'pattern' is longer than 4096 bytes");
    RegexTranslator t{re};
    auto body = t.translate();
    if (!body.ok()) return error(path, body.status().message());
    return add_rule(hint, "\"\\\"\" " + *body + " \"\\\"\"");
  }

  Result<int64_t> count_keyword(const json& s, const char* key, const std::string& path, int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.template get<double>()) == v.template get<double>()))
      return error(path + "/" + key, fmt::format("'{}' must be an integer", key));
    const double d = v.template get<double>();
    if (d < 0 || d > kMaxRepeat) return error(path + "/" + key, fmt::format("'{}' must be between 0 and {}", key, kMaxRepeat));
    return static_cast<int64_t>(d);
  }

  // `minimum` / `maximum` of `s`, each at most `limit` away from 0: rounded inward to integers,
  // or, with `integers_only`, refused unless they are integers.
  static bool has_bounds(const json& s) {
    return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
           s.contains("exclusiveMaximum");
  }

  // minimum/maximum and their exclusive forms (JSON Schema's numbers, as pydantic's ge/gt/le/lt
  // write them), the stricter of each pair. `integers_only` (a number's): the bounds themselves
  // must be integers, kept with their exclusiveness; otherwise (an integer's) they become the
  // inclusive integer bounds they imply.
  struct Bounds {
    std::optional<int64_t> lo, hi;
    bool lo_excl = false, hi_excl = false;
  };
  Result<Bounds> read_bounds(const json& s, const std::string& path, double limit, const char* limit_text,
                             bool integers_only) {
    Bounds b;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const json& v = s[key];
      const std::string k = key;
      if (v.is_boolean()) {
        return error(path + "/" + k, fmt::format("a boolean '{}' (draft 4) is not supported; give the bound itself", k));
      }
      if (!v.is_number()) return error(path + "/" + k, fmt::format("'{}' must be a number", k));
      const double d = v.template get<double>();
      if (std::fabs(d) > limit) return error(path + "/" + k, fmt::format("'{}' is beyond +-{}", k, limit_text));
      if (integers_only && std::floor(d) != d)
        return error(path + "/" + k, fmt::format("a '{}' of {} on a number is not supported (integer bounds are)", k, d));
      const bool lower = k == "minimum" || k == "exclusiveMinimum";
      bool excl = k.starts_with("exclusive");
      int64_t x = 0;
      if (integers_only) {
        x = static_cast<int64_t>(d);
      } else {  // an integer's: the nearest integer inside
        x = static_cast<int64_t>(lower ? (excl ? std::floor(d) + 1 : std::ceil(d)) : (excl ? std::ceil(d) - 1 : std::floor(d)));
        excl = false;
      }
      std::optional<int64_t>& bound = lower ? b.lo : b.hi;
      bool& bound_excl = lower ? b.lo_excl : b.hi_excl;
      const bool stricter = !bound || (lower ? x > *bound : x < *bound) || (x == *bound && excl);
      if (stricter) {
        bound = x;
        bound_excl = excl;
      }
    }
    if (b.lo && b.hi && (*b.hi < *b.lo || (*b.hi == *b.lo && (b.lo_excl || b.hi_excl)))) {
      return error(path, "the upper bound is below the lower one");
    }
    return b;
  }

  // Appends the decimal forms of the naturals [a, b] (b empty: unbounded) between `sign` and `suffix`.
  static void add_naturals(const std::string& sign, uint64_t a, std::optional<uint64_t> b, const std::string& suffix,
                           std::vector<std::string>* alts) {
    std::vector<std::string> r;
    natural_range(a, b, &r);
    for (const auto& x : r) alts->push_back(sign + "(" + x + ")" + suffix);
  }

  static std::string join_alternatives(const std::vector<std::string>& alts) {
    std::string body;
    for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
    return body;
  }

  Result<std::string> integer_range(const json& s, const std::string& path, const std::string& hint) {
    Bounds b;
    HZ_ASSIGN_OR_RETURN(b, read_bounds(s, path, 1e18, "1e18", /*integers_only=*/false));
    const std::optional<int64_t> lo = b.lo, hi = b.hi;
    std::vector<std::string> alts;
    // Negative part: values in [lo, min(hi, -1)], written "-" and their absolute value.
    if (!lo || *lo < 0) {
      const int64_t neg_hi = hi ? std::min<int64_t>(*hi, -1) : -1;
      if (!lo || *lo <= neg_hi)
        add_naturals("\"-\" ", static_cast<uint64_t>(-neg_hi), lo ? std::optional<uint64_t>(static_cast<uint64_t>(-*lo)) : std::nullopt,
                     "", &alts);
    }
    if (!hi || *hi >= 0) {
      const uint64_t a = lo ? static_cast<uint64_t>(std::max<int64_t>(*lo, 0)) : 0;
      add_naturals("", a, hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt, "", &alts);
    }
    return add_rule(hint, join_alternatives(alts));
  }

  Result<std::string> object(const json& s, const std::string& path, const std::string& hint, int depth) {
    if (s.contains("additionalProperties")) {
      const json& ap = s["additionalProperties"];
      if (!(ap.is_boolean() && !ap.template get<bool>()))
        return error(path + "/additionalProperties", "only 'additionalProperties': false is supported");
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return error(path + "/required", "'required' must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return error(path + "/required", "'required' must be an array of names");
        required.insert(r.template get<std::string>());
      }
    }
    if (!s.contains("properties")) {
      if (!required.empty()) return error(path + "/required", "'required' names properties the schema does not define");
      return add_rule(hint, "\"{\" ws \"}\"");
    }
    const json& props = s["properties"];
    if (!props.is_object()) return error(path + "/properties", "'properties' must be an object");
    for (const auto& r : required) {
      if (!props.contains(r)) return error(path + "/required", fmt::format("required property '{}' is not in 'properties'", r));
    }
    struct Prop {
      std::string kv;
      bool required;
    };
    std::vector<Prop> list;
    for (const auto& [name, sub] : props.items()) {
      std::string value;
      HZ_ASSIGN_OR_RETURN(value, visit(sub, path + "/properties/" + name, name, depth + 1));
      list.push_back({literal(json(name).dump()) + " ws \":\" ws " + value + " ws", required.count(name) != 0});
    }
    // head_k: properties k.. with none written yet; tail_k: with some written (each then needs ",").
    const size_t n = list.size();
    std::string tail = "\"\"", head = "\"\"";
    for (size_t k = n; k-- > 0;) {
      const Prop& p = list[k];
      std::string tail_k, head_k;
      if (p.required) {
        tail_k = "\",\" ws " + p.kv + " " + tail;
        head_k = p.kv + " " + tail;
      } else {
        tail_k = "(\",\" ws " + p.kv + ")? " + tail;
        head_k = "(" + p.kv + " " + tail + " | " + head + ")";
      }
      HZ_ASSIGN_OR_RETURN(tail, add_rule(hint + "-tail", tail_k));
      HZ_ASSIGN_OR_RETURN(head, add_rule(hint + "-head", head_k));
    }
    return add_rule(hint, "\"{\" ws " + head + " \"}\"");
  }

  Result<std::string> resolve_ref(const json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return error(path + "/$ref", "'$ref' must be a string");
    const std::string r = ref.template get<std::string>();
    auto it = refs_.find(r);
    if (it != refs_.end()) return it->second;
    std::string key;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (r.rfind(prefix, 0) == 0) {
        key = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        const std::string name = r.substr(std::string(prefix).size());
        if (!root_.contains(key) || !root_[key].is_object() || !root_[key].contains(name))
          return error(path + "/$ref", fmt::format("'$ref' '{}' names no definition", r));
        // The rule is named before its body is compiled so that recursive references resolve.
        const std::string rule = fresh("ref-" + name);
        refs_.emplace(r, rule);
        const size_t slot = rules_.size();
        rules_.emplace_back(rule, "");
        std::string body;
        HZ_ASSIGN_OR_RETURN(body, visit(root_[key][name], "/" + key + "/" + name, name, depth + 1));
        rules_[slot].second = body;
        return rule;
      }
    }
    if (r == "#") return error(path + "/$ref", "'$ref' to the whole schema ('#') is not supported; use $defs");
    return error(path + "/$ref", fmt::format("only local references '#/$defs/...' are supported, not '{}'", r));
  }

  const json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  int next_id_ = 0;
};

}  // namespace

Result<std::string> json_schema_to_grammar(const nlohmann::json& schema) {
  return SchemaCompiler<nlohmann::json>(schema).compile();
}

Result<std::string> json_schema_to_grammar(const nlohmann::ordered_json& schema) {
  return SchemaCompiler<nlohmann::ordered_json>(schema).compile();
}

std::string json_object_grammar() { return std::string("root ::= \" \"? json-object\n") + kCommonRules; }

}  // namespace hz::grammar
