// Filters and tests of the chat-template language, with the semantics of Jinja as
// transformers configures it (tojson is json.dumps with ensure_ascii=False).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_builtins.h"

namespace hz::jinja {
namespace {

constexpr uint64_t kValueBytes = sizeof(Value);

Result<Value> make_string(Interpreter& in, std::string s) {
  HZ_RETURN_IF_ERROR(in.charge(s.size()));
  return Value::string(std::move(s));
}

Result<Value> make_list(Interpreter& in, std::vector<Value> items) {
  HZ_RETURN_IF_ERROR(in.charge(items.size() * kValueBytes + 64));
  return Value::list(std::move(items));
}

bool arg_bool(const CallArgs& args, size_t idx, const char* name, bool def) {
  const Value* v = args.get(idx, name);
  return v ? v->truthy() : def;
}

// Looks up a possibly dotted attribute path ("function.name") as Jinja's attribute filters do.
Result<Value> attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('.', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part.empty() || part[0] == '_') return invalid_argument("attribute '{}' is not allowed", path);
    bool is_index = std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    cur = is_index ? get_item(cur, Value::integer(std::atoll(part.c_str()))) : get_attribute(cur, part);
    i = j + 1;
  }
  return cur;
}

Result<std::vector<Value>> select_items(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  bool by_attr = name == "selectattr" || name == "rejectattr";
  bool keep_if = name == "select" || name == "selectattr";
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
  size_t first_test_arg = by_attr ? 1 : 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string())
      return invalid_argument("{}() needs an attribute name", name);
    attr = args.positional[0].as_string();
  }
  std::string test;
  CallArgs test_args;
  if (args.positional.size() > first_test_arg) {
    if (!args.positional[first_test_arg].is_string()) return invalid_argument("{}(): the test name must be a string", name);
    test = args.positional[first_test_arg].as_string();
    test_args.positional.assign(args.positional.begin() + first_test_arg + 1, args.positional.end());
  }
  std::vector<Value> out;
  for (const Value& item : items) {
    HZ_RETURN_IF_ERROR(in.step());
    Value subject = item;
    if (by_attr) {
      HZ_ASSIGN_OR_RETURN(subject, attribute_path(item, attr));
    }
    bool pass = subject.truthy();
    if (!test.empty()) {
      HZ_ASSIGN_OR_RETURN(pass, apply_test(in, test, subject, test_args));
    }
    if (pass == keep_if) out.push_back(item);
  }
  return out;
}

// Jinja compares strings case-insensitively in sort/unique unless case_sensitive is set.
Value sort_key(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  std::string s = v.as_string();
  for (char& c : s) c = std::tolower(static_cast<unsigned char>(c));
  return Value::string(std::move(s));
}

Result<Value> filter_tojson(Interpreter& in, const Value& v, const CallArgs& args) {
  JsonFormat fmt;
  fmt.ensure_ascii = arg_bool(args, 0, "ensure_ascii", false);
  const Value* indent = args.get(1, "indent");
  if (indent && indent->is_int()) {
    fmt.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
    fmt.item_sep = ",";
  } else if (indent && !indent->is_none() && !indent->is_undefined()) {
    return invalid_argument("tojson: indent must be an integer");
  }
  const Value* seps = args.get(2, "separators");
  if (seps && seps->is_list()) {
    const auto& s = seps->as_list().items;
    if (s.size() != 2 || !s[0].is_string() || !s[1].is_string())
      return invalid_argument("tojson: separators must be two strings");
    fmt.item_sep = s[0].as_string();
    fmt.key_sep = s[1].as_string();
  }
  fmt.sort_keys = arg_bool(args, 3, "sort_keys", false);
  HZ_RETURN_IF_ERROR(in.step(1 + v.depth()));
  HZ_ASSIGN_OR_RETURN(std::string s, to_json(v, fmt));
  return make_string(in, std::move(s));
}

Result<Value> filter_indent(Interpreter& in, const Value& v, const CallArgs& args) {
  std::string pad = "    ";
  if (const Value* w = args.get(0, "width")) {
    if (w->is_string()) {
      pad = w->as_string();
    } else if (w->is_int()) {
      pad.assign(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 256)), ' ');
    }
  }
  bool first = arg_bool(args, 1, "first", false);
  bool blank = arg_bool(args, 2, "blank", false);
  std::string s = to_display(v);
  std::string out;
  size_t i = 0;
  bool first_line = true;
  while (i <= s.size()) {
    size_t j = s.find('\n', i);
    if (j == std::string::npos) j = s.size();
    bool empty = j == i;
    if ((!first_line || first) && (!empty || blank)) out += pad;
    out.append(s, i, j - i);
    if (j < s.size()) out += '\n';
    first_line = false;
    if (out.size() > in.limits().max_alloc_bytes) return in.charge(out.size());
    i = j + 1;
  }
  return make_string(in, std::move(out));
}

Result<Value> filter_number(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  bool to_int = name == "int";
  const Value* def = args.get(0, "default");
  Value fallback = def ? *def : (to_int ? Value::integer(0) : Value::floating(0.0));
  if (v.is_int() || v.is_bool()) return to_int ? Value::integer(v.as_int()) : Value::floating(v.as_double());
  if (v.is_float()) {
    double d = v.as_double();
    if (!to_int) return v;
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    std::string s = v.as_string();
    const char* b = s.c_str();
    char* end = nullptr;
    errno = 0;
    if (to_int) {
      long long x = std::strtoll(b, &end, 10);
      while (*end && std::isspace(static_cast<unsigned char>(*end))) ++end;
      if (end != b && !*end && errno == 0) return Value::integer(x);
    }
    double d = std::strtod(b, &end);
    while (end && *end && std::isspace(static_cast<unsigned char>(*end))) ++end;
    if (end != b && end && !*end) {
      if (!to_int) return Value::floating(d);
      if (std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
    }
  }
  return fallback;
}

Result<Value> filter_sort(Interpreter& in, const Value& v, const CallArgs& args) {
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
  bool reverse = arg_bool(args, 0, "reverse", false);
  bool case_sensitive = arg_bool(args, 1, "case_sensitive", false);
  const Value* attr = args.get(2, "attribute");
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    Value k = items[i];
    if (attr && attr->is_string()) {
      HZ_ASSIGN_OR_RETURN(k, attribute_path(k, attr->as_string()));
    }
    keyed.emplace_back(sort_key(k, case_sensitive), i);
  }
  HZ_RETURN_IF_ERROR(in.step(items.size() * (1 + static_cast<uint64_t>(std::log2(items.size() + 1)))));
  Status err;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    auto c = values_compare(a.first, b.first);
    if (!c.ok()) {
      if (err.ok()) err = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  HZ_RETURN_IF_ERROR(err);
  std::vector<Value> out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return make_list(in, std::move(out));
}

Result<Value> filter_map(Interpreter& in, const Value& v, const CallArgs& args) {
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
  const Value* attr = nullptr;
  for (const auto& [k, x] : args.keyword)
    if (k == "attribute") attr = &x;
  std::vector<Value> out;
  if (attr) {
    if (!attr->is_string()) return invalid_argument("map(): attribute must be a string");
    const Value* def = nullptr;
    for (const auto& [k, x] : args.keyword)
      if (k == "default") def = &x;
    for (const Value& item : items) {
      HZ_RETURN_IF_ERROR(in.step());
      HZ_ASSIGN_OR_RETURN(Value x, attribute_path(item, attr->as_string()));
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return make_list(in, std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string())
    return invalid_argument("map() needs a filter name or attribute=");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    HZ_RETURN_IF_ERROR(in.step());
    HZ_ASSIGN_OR_RETURN(Value x, apply_filter(in, args.positional[0].as_string(), item, rest));
    out.push_back(std::move(x));
  }
  return make_list(in, std::move(out));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

Result<Value> apply_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  HZ_RETURN_IF_ERROR(in.step());
  if (name == "safe") return v;
  if (name == "string") return v.is_string() ? v : make_string(in, to_display(v));
  if (name == "default" || name == "d") {
    const Value* def = args.get(0, "default_value");
    bool boolean = arg_bool(args, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return def ? *def : Value::string("");
    return v;
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(utf8_chars(v.as_string()).size()));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.as_list().items.size()));
    if (v.is_dict() || v.is_namespace()) return Value::integer(static_cast<int64_t>(v.as_dict().entries.size()));
    if (v.is_undefined()) return Value::integer(0);
    return invalid_argument("a {} has no length", v.type_name());
  }
  if (name == "tojson") return filter_tojson(in, v, args);
  if (name == "trim" || name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "replace") {
    std::string s = to_display(v);
    std::string method = name == "trim" ? "strip" : name;
    return call_method(in, *std::make_unique<Value>(Value::string(std::move(s))), method, args);
  }
  if (name == "join") {
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
    const Value* sep = args.get(0, "d");
    const Value* attr = args.get(1, "attribute");
    std::string d = sep && sep->is_string() ? sep->as_string() : "";
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      HZ_RETURN_IF_ERROR(in.step());
      Value x = items[i];
      if (attr && attr->is_string()) {
      HZ_ASSIGN_OR_RETURN(x, attribute_path(x, attr->as_string()));
    }
      if (i) out += d;
      out += to_display(x);
      if (out.size() > in.limits().max_alloc_bytes) return in.charge(out.size());
    }
    return make_string(in, std::move(out));
  }
  if (name == "first" || name == "last") {
    if (v.is_string()) {
      auto chars = utf8_chars(v.as_string());
      if (chars.empty()) return Value();
      return Value::string(std::string(name == "first" ? chars.front() : chars.back()));
    }
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    if (v.is_list() && !v.as_list().is_tuple) return v;
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
    return make_list(in, std::move(items));
  }
  if (name == "int" || name == "float") return filter_number(in, name, v, args);
  if (name == "abs") {
    if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) {
      if (v.as_int() == INT64_MIN) return out_of_range("integer overflow in abs");
      return Value::integer(std::llabs(v.as_int()));
    }
    return invalid_argument("abs: bad operand type {}", v.type_name());
  }
  if (name == "round") {
    if (!v.is_number() && !v.is_bool()) return invalid_argument("round: bad operand type {}", v.type_name());
    const Value* p = args.get(0, "precision");
    const Value* m = args.get(1, "method");
    int64_t prec = p && p->is_int() ? std::clamp<int64_t>(p->as_int(), -20, 20) : 0;
    std::string method = m && m->is_string() ? m->as_string() : "common";
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_double() * scale;
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value::floating(r / scale);
  }
  if (name == "items" || name == "keys" || name == "values") {
    if (v.is_undefined()) return Value::list(std::vector<Value>{});
    if (!v.is_dict()) return invalid_argument("{}: expected a dict, got {}", name, v.type_name());
    return call_method(in, *std::make_unique<Value>(v), name, CallArgs{});
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, select_items(in, name, v, args));
    return make_list(in, std::move(items));
  }
  if (name == "map") return filter_map(in, v, args);
  if (name == "sort") return filter_sort(in, v, args);
  if (name == "unique") {
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    const Value* attr = args.get(1, "attribute");
    std::vector<Value> out, seen;
    HZ_RETURN_IF_ERROR(in.step(items.size() * items.size() / 8));
    for (const Value& item : items) {
      Value k = item;
      if (attr && attr->is_string()) {
      HZ_ASSIGN_OR_RETURN(k, attribute_path(item, attr->as_string()));
    }
      k = sort_key(k, case_sensitive);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, k); })) {
        seen.push_back(k);
        out.push_back(item);
      }
    }
    return make_list(in, std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto chars = utf8_chars(v.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.append(*it);
      return make_string(in, std::move(out));
    }
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
    std::reverse(items.begin(), items.end());
    return make_list(in, std::move(items));
  }
  if (name == "sum" || name == "min" || name == "max") {
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
    if (name == "sum") {
      Value acc = Value::integer(0);
      if (const Value* start = args.get(1, "start")) acc = *start;
      for (const Value& x : items) {
        if (!(x.is_number() || x.is_bool()) || !(acc.is_number() || acc.is_bool()))
          return invalid_argument("sum: items must be numbers");
        if (acc.is_float() || x.is_float()) {
          acc = Value::floating(acc.as_double() + x.as_double());
        } else {
          int64_t r;
          if (__builtin_add_overflow(acc.as_int(), x.as_int(), &r)) return out_of_range("integer overflow in sum");
          acc = Value::integer(r);
        }
      }
      return acc;
    }
    if (items.empty()) return Value();
    Value best = items[0];
    for (const Value& x : items) {
      HZ_ASSIGN_OR_RETURN(int c, values_compare(x, best));
      if (name == "min" ? c < 0 : c > 0) best = x;
    }
    return best;
  }
  if (name == "escape" || name == "e" || name == "forceescape") return make_string(in, html_escape(to_display(v)));
  if (name == "indent") return filter_indent(in, v, args);
  if (name == "wordcount") {
    std::string s = to_display(v);
    int64_t words = 0;
    bool in_word = false;
    for (unsigned char c : s) {
      bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value::integer(words);
  }
  if (name == "striptags") {
    std::string s = to_display(v), out;
    bool in_tag = false, space = false;
    for (char c : s) {
      if (c == '<') in_tag = true;
      if (!in_tag) {
        bool ws = std::isspace(static_cast<unsigned char>(c));
        if (ws) {
          space = !out.empty();
        } else {
          if (space) out += ' ';
          space = false;
          out += c;
        }
      }
      if (c == '>') in_tag = false;
    }
    return make_string(in, std::move(out));
  }
  if (name == "attr") {
    const Value* a = args.get(0, "name");
    if (!a || !a->is_string() || a->as_string().empty() || a->as_string()[0] == '_')
      return invalid_argument("attr: the attribute name must be a string not starting with '_'");
    return get_attribute(v, a->as_string());
  }
  return invalid_argument("unknown filter '{}'", name);
}

Result<bool> apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  HZ_RETURN_IF_ERROR(in.step());
  const Value* arg = args.get(0, "other");
  auto need_arg = [&]() -> Status {
    return arg ? Status() : invalid_argument("test '{}' needs an argument", name);
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.is_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_callable();
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string& s = v.as_string();
    return std::none_of(s.begin(), s.end(), [&](char c) {
      return name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c));
    });
  }
  if (name == "odd" || name == "even") {
    if (!v.is_int()) return invalid_argument("test '{}' needs an integer, got {}", name, v.type_name());
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    HZ_RETURN_IF_ERROR(need_arg());
    if (!v.is_int() || !arg->is_int() || arg->as_int() == 0) return invalid_argument("divisibleby needs non-zero integers");
    if (arg->as_int() == -1) return true;
    return v.as_int() % arg->as_int() == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "ne" || name == "!=") {
    HZ_RETURN_IF_ERROR(need_arg());
    return values_equal(v, *arg) == (name != "ne" && name != "!=");
  }
  if (name == "sameas") {
    HZ_RETURN_IF_ERROR(need_arg());
    if (v.kind() != arg->kind()) return false;
    if (v.is_list()) return v.list_ptr() == arg->list_ptr();
    if (v.is_dict() || v.is_namespace()) return v.dict_ptr() == arg->dict_ptr();
    return values_equal(v, *arg);
  }
  if (name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" || name == ">" || name == "ge" ||
      name == ">=") {
    HZ_RETURN_IF_ERROR(need_arg());
    HZ_ASSIGN_OR_RETURN(int c, values_compare(v, *arg));
    if (name == "lt" || name == "<") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == ">") return c > 0;
    return c >= 0;
  }
  if (name == "in") {
    HZ_RETURN_IF_ERROR(need_arg());
    if (arg->is_string()) return v.is_string() && arg->as_string().find(v.as_string()) != std::string::npos;
    if (arg->is_dict()) return v.is_string() && arg->as_dict().find(v.as_string()) != nullptr;
    HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, *arg));
    return std::any_of(items.begin(), items.end(), [&](const Value& x) { return values_equal(v, x); });
  }
  return invalid_argument("unknown test '{}'", name);
}

}  // namespace hz::jinja
