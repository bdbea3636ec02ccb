// Filters and tests of the chat-template language, with the semantics of Jinja as
// transformers configures it (tojson is json.dumps with ensure_ascii=False).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "chat/jinja_builtins.h"

namespace hz::jinja {
namespace {

constexpr uint64_t kValueBytes = sizeof(Value);

Result<Value> make_string(Interpreter& in, Text s) {
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

Result<Value> tojson_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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
  return make_string(in, Text(std::move(s), has_input(v)));
}

Result<Value> indent_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  Text pad(std::string(4, ' '));
  if (const Value* w = args.get(0, "width")) {
    if (w->is_string()) {
      pad = w->as_text();
    } else if (w->is_int()) {
      pad = Text(std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 256)), ' '));
    }
  }
  bool first = arg_bool(args, 1, "first", false);
  bool blank = arg_bool(args, 2, "blank", false);
  Text t = to_text(v);
  const std::string& s = t.str();
  Text out;
  size_t i = 0;
  bool first_line = true;
  while (i <= s.size()) {
    size_t j = s.find('\n', i);
    if (j == std::string::npos) j = s.size();
    bool empty = j == i;
    if ((!first_line || first) && (!empty || blank)) out.append(pad);
    out.append(t, i, std::min(j + 1, s.size()));  // the line and its newline
    first_line = false;
    if (out.size() > in.limits().max_alloc_bytes) return in.charge(out.size());
    i = j + 1;
  }
  return make_string(in, std::move(out));
}

Result<Value> number_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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

Result<Value> sort_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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

Result<Value> map_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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

Result<Value> safe_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v;
}

Result<Value> string_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_string() ? v : make_string(in, to_text(v));
}

Result<Value> default_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* def = args.get(0, "default_value");
  bool boolean = arg_bool(args, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return def ? *def : Value::string("");
  return v;
}

Result<Value> length_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (v.is_string()) return Value::integer(static_cast<int64_t>(utf8_chars(v.as_string()).size()));
  if (v.is_list()) return Value::integer(static_cast<int64_t>(v.as_list().items.size()));
  if (v.is_dict() || v.is_namespace()) return Value::integer(static_cast<int64_t>(v.as_dict().entries.size()));
  if (v.is_undefined()) return Value::integer(0);
  return invalid_argument("a {} has no length", v.type_name());
}

Result<Value> string_method_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  std::string method = name == "trim" ? "strip" : name;
  Value str = Value::string(to_text(v));
  return call_method(in, str, method, args);
}

Result<Value> join_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
  const Value* sep = args.get(0, "d");
  const Value* attr = args.get(1, "attribute");
  Text d = sep && sep->is_string() ? sep->as_text() : Text();
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    HZ_RETURN_IF_ERROR(in.step());
    Value x = items[i];
    if (attr && attr->is_string()) {
    HZ_ASSIGN_OR_RETURN(x, attribute_path(x, attr->as_string()));
  }
    if (i) out.append(d);
    out.append(to_text(x));
    if (out.size() > in.limits().max_alloc_bytes) return in.charge(out.size());
  }
  return make_string(in, std::move(out));
}

Result<Value> first_last_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (v.is_string()) {
    auto chars = utf8_chars(v.as_string());
    if (chars.empty()) return Value();
    std::string_view c = name == "first" ? chars.front() : chars.back();
    size_t at = c.data() - v.as_string().data();
    return Value::string(v.as_text().substr(at, at + c.size()));
  }
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
  if (items.empty()) return Value();
  return name == "first" ? items.front() : items.back();
}

Result<Value> list_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (v.is_list() && !v.as_list().is_tuple) return v;
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
  return make_list(in, std::move(items));
}

Result<Value> abs_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) return out_of_range("integer overflow in abs");
    return Value::integer(std::llabs(v.as_int()));
  }
  return invalid_argument("abs: bad operand type {}", v.type_name());
}

Result<Value> round_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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

Result<Value> dict_view_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (v.is_undefined()) return Value::list(std::vector<Value>{});
  if (!v.is_dict()) return invalid_argument("{}: expected a dict, got {}", name, v.type_name());
  return call_method(in, *std::make_unique<Value>(v), name, CallArgs{});
}

Result<Value> select_family_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, select_items(in, name, v, args));
  return make_list(in, std::move(items));
}

Result<Value> unique_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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

Result<Value> reverse_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (v.is_string()) {
    auto chars = utf8_chars(v.as_string());
    Text out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) {
      size_t at = it->data() - v.as_string().data();
      out.append(v.as_text(), at, at + it->size());
    }
    return make_string(in, std::move(out));
  }
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, v));
  std::reverse(items.begin(), items.end());
  return make_list(in, std::move(items));
}

Result<Value> sum_min_max_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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

Result<Value> escape_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return make_string(in, to_text(v).derive(html_escape(to_display(v))));
}

Result<Value> wordcount_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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

Result<Value> striptags_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
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
  return make_string(in, to_text(v).derive(std::move(out)));
}

Result<Value> attr_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* a = args.get(0, "name");
  if (!a || !a->is_string() || a->as_string().empty() || a->as_string()[0] == '_')
    return invalid_argument("attr: the attribute name must be a string not starting with '_'");
  return get_attribute(v, a->as_string());
}

using FilterFn = Result<Value> (*)(Interpreter&, const std::string& name, const Value&, const CallArgs&);

// Name -> implementation; several names may share one (the implementation then reads `name`).
const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"safe", safe_filter},
      {"string", string_filter},
      {"default", default_filter},
      {"d", default_filter},
      {"length", length_filter},
      {"count", length_filter},
      {"tojson", tojson_filter},
      {"trim", string_method_filter},
      {"upper", string_method_filter},
      {"lower", string_method_filter},
      {"title", string_method_filter},
      {"capitalize", string_method_filter},
      {"replace", string_method_filter},
      {"join", join_filter},
      {"first", first_last_filter},
      {"last", first_last_filter},
      {"list", list_filter},
      {"int", number_filter},
      {"float", number_filter},
      {"abs", abs_filter},
      {"round", round_filter},
      {"items", dict_view_filter},
      {"keys", dict_view_filter},
      {"values", dict_view_filter},
      {"select", select_family_filter},
      {"reject", select_family_filter},
      {"selectattr", select_family_filter},
      {"rejectattr", select_family_filter},
      {"map", map_filter},
      {"sort", sort_filter},
      {"unique", unique_filter},
      {"reverse", reverse_filter},
      {"sum", sum_min_max_filter},
      {"min", sum_min_max_filter},
      {"max", sum_min_max_filter},
      {"escape", escape_filter},
      {"e", escape_filter},
      {"forceescape", escape_filter},
      {"indent", indent_filter},
      {"wordcount", wordcount_filter},
      {"striptags", striptags_filter},
      {"attr", attr_filter},
  };
  return table;
}

Status need_arg(const Value* arg, const std::string& test) {
  return arg ? Status() : invalid_argument("test '{}' needs an argument", test);
}

Result<bool> is_defined(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return !v.is_undefined();
}

Result<bool> is_undefined(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_undefined();
}

Result<bool> is_none(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_none();
}

Result<bool> is_string(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_string();
}

Result<bool> is_number(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_number() || v.is_bool();
}

Result<bool> is_integer(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_int();
}

Result<bool> is_float(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_float();
}

Result<bool> is_boolean(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_bool();
}

Result<bool> is_true(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_bool() && v.as_bool();
}

Result<bool> is_false(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_bool() && !v.as_bool();
}

Result<bool> is_iterable(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_list() || v.is_dict() || v.is_string();
}

Result<bool> is_mapping(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_dict();
}

Result<bool> is_sequence(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_list() || v.is_dict() || v.is_string();
}

Result<bool> is_callable(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return v.is_callable();
}

Result<bool> is_case(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (!v.is_string()) return false;
  const std::string& s = v.as_string();
  return std::none_of(s.begin(), s.end(), [&](char c) {
    return name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c));
  });
}

Result<bool> is_parity(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  if (!v.is_int()) return invalid_argument("test '{}' needs an integer, got {}", name, v.type_name());
  return (v.as_int() % 2 != 0) == (name == "odd");
}

Result<bool> is_divisibleby(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* arg = args.get(0, "other");
  HZ_RETURN_IF_ERROR(need_arg(arg, name));
  if (!v.is_int() || !arg->is_int() || arg->as_int() == 0) return invalid_argument("divisibleby needs non-zero integers");
  if (arg->as_int() == -1) return true;
  return v.as_int() % arg->as_int() == 0;
}

Result<bool> is_equal(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* arg = args.get(0, "other");
  HZ_RETURN_IF_ERROR(need_arg(arg, name));
  return values_equal(v, *arg) == (name != "ne" && name != "!=");
}

Result<bool> is_sameas(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* arg = args.get(0, "other");
  HZ_RETURN_IF_ERROR(need_arg(arg, name));
  if (v.kind() != arg->kind()) return false;
  if (v.is_list()) return v.list_ptr() == arg->list_ptr();
  if (v.is_dict() || v.is_namespace()) return v.dict_ptr() == arg->dict_ptr();
  return values_equal(v, *arg);
}

Result<bool> is_ordered(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* arg = args.get(0, "other");
  HZ_RETURN_IF_ERROR(need_arg(arg, name));
  HZ_ASSIGN_OR_RETURN(int c, values_compare(v, *arg));
  if (name == "lt" || name == "<") return c < 0;
  if (name == "le" || name == "<=") return c <= 0;
  if (name == "gt" || name == ">") return c > 0;
  return c >= 0;
}

Result<bool> is_in(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* arg = args.get(0, "other");
  HZ_RETURN_IF_ERROR(need_arg(arg, name));
  if (arg->is_string()) return v.is_string() && arg->as_string().find(v.as_string()) != std::string::npos;
  if (arg->is_dict()) return v.is_string() && arg->as_dict().find(v.as_string()) != nullptr;
  HZ_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(in, *arg));
  return std::any_of(items.begin(), items.end(), [&](const Value& x) { return values_equal(v, x); });
}

using TestFn = Result<bool> (*)(Interpreter&, const std::string& name, const Value&, const CallArgs&);

// Name -> implementation; several names may share one (the implementation then reads `name`).
const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", is_defined},
      {"undefined", is_undefined},
      {"none", is_none},
      {"string", is_string},
      {"number", is_number},
      {"integer", is_integer},
      {"float", is_float},
      {"boolean", is_boolean},
      {"true", is_true},
      {"false", is_false},
      {"iterable", is_iterable},
      {"mapping", is_mapping},
      {"sequence", is_sequence},
      {"callable", is_callable},
      {"lower", is_case},
      {"upper", is_case},
      {"odd", is_parity},
      {"even", is_parity},
      {"divisibleby", is_divisibleby},
      {"equalto", is_equal},
      {"eq", is_equal},
      {"==", is_equal},
      {"ne", is_equal},
      {"!=", is_equal},
      {"sameas", is_sameas},
      {"lt", is_ordered},
      {"<", is_ordered},
      {"le", is_ordered},
      {"<=", is_ordered},
      {"gt", is_ordered},
      {">", is_ordered},
      {"ge", is_ordered},
      {">=", is_ordered},
      {"in", is_in},
  };
  return table;
}

}  // namespace

Result<Value> apply_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  HZ_RETURN_IF_ERROR(in.step());
  auto it = filter_table().find(name);
  if (it == filter_table().end()) return invalid_argument("unknown filter '{}'", name);
  return it->second(in, name, v, args);
}

Result<bool> apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  HZ_RETURN_IF_ERROR(in.step());
  auto it = test_table().find(name);
  if (it == test_table().end()) return invalid_argument("unknown test '{}'", name);
  return it->second(in, name, v, args);
}

}  // namespace hz::jinja
