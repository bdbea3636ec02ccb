// Methods of str/list/dict, attribute and item access, iteration and the global functions of
// the chat-template language. Only the methods listed here exist: there is no reflection.
#include <algorithm>
#include <cctype>
#include <ctime>
#include <string_view>
#include <unordered_map>

#include "chat/jinja_builtins.h"

namespace hz::jinja {
namespace {

constexpr uint64_t kValueBytes = sizeof(Value);

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

const char* const kListMethods[] = {"append", "pop", "extend", "insert", "index", "count"};
const char* const kDictMethods[] = {"items", "keys", "values", "get"};

template <size_t N>
bool contains(const char* const (&names)[N], const std::string& name) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

Result<std::string> string_arg(const CallArgs& args, size_t idx, const char* name, const char* method) {
  const Value* v = args.get(idx, name);
  if (!v || !v->is_string()) return invalid_argument("{}() argument '{}' must be a string", method, name);
  return v->as_string();
}

Result<Value> make_text(Interpreter& in, Text t) {
  HZ_RETURN_IF_ERROR(in.charge(t.size()));
  return Value::string(std::move(t));
}

Result<Value> str_strip(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  const Value* chars = args.get(0, "chars");
  auto strip_char = [&](char c) {
    return chars && chars->is_string() ? chars->as_string().find(c) != std::string::npos : is_ws(c);
  };
  size_t b = 0, e = s.size();
  if (name != "rstrip")
    while (b < e && strip_char(s[b])) ++b;
  if (name != "lstrip")
    while (e > b && strip_char(s[e - 1])) --e;
  return make_text(in, t.substr(b, e));
}

Result<Value> str_case(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  std::string out = s;
  for (char& c : out) c = name == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c));
  return make_text(in, t.derive(std::move(out)));
}

Result<Value> str_title(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    unsigned char u = c;
    bool alpha = std::isalpha(u);
    if (name == "capitalize") {
      c = start ? std::toupper(u) : std::tolower(u);
      start = false;
    } else {
      c = alpha ? (start ? std::toupper(u) : std::tolower(u)) : c;
      start = !alpha;
    }
  }
  return make_text(in, t.derive(std::move(out)));
}

Result<Value> str_startswith(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  const Value* p = args.get(0, "prefix");
  if (!p) return invalid_argument("{}() needs an argument", name);
  std::vector<Value> options = p->is_list() ? p->as_list().items : std::vector<Value>{*p};
  for (const Value& o : options) {
    if (!o.is_string()) return invalid_argument("{}() arguments must be strings", name);
    const std::string& x = o.as_string();
    bool hit = x.size() <= s.size() &&
               (name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Result<Value> str_split(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  const Value* sep = args.get(0, "sep");
  const Value* max_v = args.get(1, "maxsplit");
  int64_t maxsplit = max_v && max_v->is_int() ? max_v->as_int() : -1;
  std::vector<Value> parts;
  if (!sep || sep->is_none()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_ws(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && is_ws(s[e - 1])) --e;
        parts.push_back(Value::string(t.substr(i, e)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_ws(s[j])) ++j;
      parts.push_back(Value::string(t.substr(i, j)));
      i = j;
    }
  } else {
    if (!sep->is_string()) return invalid_argument("split() separator must be a string");
    const std::string& d = sep->as_string();
    if (d.empty()) return invalid_argument("split(): empty separator");
    size_t i = 0;
    for (;;) {
      size_t j = s.find(d, i);
      if (j == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
        parts.push_back(Value::string(t.substr(i, s.size())));
        break;
      }
      parts.push_back(Value::string(t.substr(i, j)));
      i = j + d.size();
    }
  }
  HZ_RETURN_IF_ERROR(in.charge(s.size() + parts.size() * kValueBytes));
  HZ_RETURN_IF_ERROR(in.step(parts.size()));
  return Value::list(std::move(parts));
}

Result<Value> str_splitlines(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  std::vector<Value> parts;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find('\n', i);
    if (j == std::string::npos) j = s.size();
    size_t e = j > i && s[j - 1] == '\r' ? j - 1 : j;
    parts.push_back(Value::string(t.substr(i, e)));
    i = j + 1;
  }
  HZ_RETURN_IF_ERROR(in.charge(s.size() + parts.size() * kValueBytes));
  return Value::list(std::move(parts));
}

Result<Value> str_replace(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  HZ_ASSIGN_OR_RETURN(std::string from, string_arg(args, 0, "old", "replace"));
  HZ_RETURN_IF_ERROR(string_arg(args, 1, "new", "replace").status());
  const Text& to = args.get(1, "new")->as_text();
  const Value* cnt = args.get(2, "count");
  int64_t limit = cnt && cnt->is_int() ? cnt->as_int() : -1;
  Text out;
  if (from.empty()) {
    // Python inserts `to` between characters and at both ends.
    auto chars = utf8_chars(s);
    int64_t done = 0;
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (limit < 0 || done < limit) {
        if (out.size() + to.size() > in.limits().max_alloc_bytes) return in.charge(in.limits().max_alloc_bytes + 1);
        out.append(to);
        ++done;
      }
      if (i < chars.size()) {
        size_t at = chars[i].data() - s.data();
        out.append(t, at, at + chars[i].size());
      }
    }
  } else {
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
      size_t j = (limit >= 0 && done >= limit) ? std::string::npos : s.find(from, i);
      if (j == std::string::npos) {
        out.append(t, i, s.size());
        break;
      }
      out.append(t, i, j);
      if (out.size() + to.size() > in.limits().max_alloc_bytes) return in.charge(in.limits().max_alloc_bytes + 1);
      out.append(to);
      i = j + from.size();
      ++done;
    }
  }
  return make_text(in, std::move(out));
}

Result<Value> str_find(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  HZ_ASSIGN_OR_RETURN(std::string sub, string_arg(args, 0, "sub", name.c_str()));
  if (name == "find") {
    size_t p = s.find(sub);
    return Value::integer(p == std::string::npos ? -1 : static_cast<int64_t>(p));
  }
  if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_chars(s).size()) + 1);
  int64_t n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
  return Value::integer(n);
}

Result<Value> str_join(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const Value* items = args.get(0, "iterable");
  if (!items) return invalid_argument("join() needs an argument");
  HZ_ASSIGN_OR_RETURN(std::vector<Value> parts, iterate(in, *items));
  Text out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].is_string()) return invalid_argument("join(): sequence item {} is a {}, not a string", i, parts[i].type_name());
    if (i) out.append(t);
    out.append(parts[i].as_text());
    if (out.size() > in.limits().max_alloc_bytes) return in.charge(out.size());
  }
  return make_text(in, std::move(out));
}

// Character class predicates (ASCII); false for "".
template <bool (*kPred)(unsigned char)>
Result<Value> str_is(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return kPred(static_cast<unsigned char>(c)); }));
}
bool digit(unsigned char c) { return std::isdigit(c); }
bool alpha(unsigned char c) { return std::isalpha(c); }
bool space(unsigned char c) { return is_ws(static_cast<char>(c)); }
bool alnum(unsigned char c) { return std::isalnum(c); }
bool not_upper(unsigned char c) { return !std::isupper(c); }
bool not_lower(unsigned char c) { return !std::islower(c); }
// Python: at least one cased character and no character of the other case.
Result<Value> str_islower(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  return Value::boolean(!s.empty() && s != str_case(in, t, "upper", {})->as_string() && std::all_of(s.begin(), s.end(), [](char c) { return not_upper(c); }));
}
Result<Value> str_isupper(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  const std::string& s = t.str();
  return Value::boolean(!s.empty() && s != str_case(in, t, "lower", {})->as_string() && std::all_of(s.begin(), s.end(), [](char c) { return not_lower(c); }));
}

using StrMethod = Result<Value> (*)(Interpreter&, const Text& t, const std::string& name, const CallArgs&);

// str methods by name; several names may share one implementation (it then reads `name`).
const std::unordered_map<std::string_view, StrMethod>& str_methods() {
  static const std::unordered_map<std::string_view, StrMethod> table = {
      {"strip", str_strip},
      {"lstrip", str_strip},
      {"rstrip", str_strip},
      {"upper", str_case},
      {"lower", str_case},
      {"title", str_title},
      {"capitalize", str_title},
      {"startswith", str_startswith},
      {"endswith", str_startswith},
      {"split", str_split},
      {"splitlines", str_splitlines},
      {"replace", str_replace},
      {"find", str_find},
      {"count", str_find},
      {"join", str_join},
      {"isdigit", str_is<digit>},
      {"isalpha", str_is<alpha>},
      {"isspace", str_is<space>},
      {"isalnum", str_is<alnum>},
      {"islower", str_islower},
      {"isupper", str_isupper},
  };
  return table;
}

Result<Value> str_method(Interpreter& in, const Text& t, const std::string& name, const CallArgs& args) {
  HZ_RETURN_IF_ERROR(in.step(1 + t.size() / 256));
  auto it = str_methods().find(name);
  if (it == str_methods().end()) return invalid_argument("str has no method '{}'", name);
  return it->second(in, t, name, args);
}

Result<Value> list_method(Interpreter& in, Value& recv, const std::string& name, const CallArgs& args) {
  const size_t n = recv.as_list().items.size();
  HZ_RETURN_IF_ERROR(in.step(1 + n / 16));
  // Copy-on-write of a shared list is paid for like any allocation.
  bool mutates = name == "append" || name == "pop" || name == "extend" || name == "insert";
  if (mutates && recv.list_ptr().use_count() > 1) HZ_RETURN_IF_ERROR(in.charge(n * kValueBytes));
  if (name == "append") {
    const Value* v = args.get(0, "object");
    if (!v) return invalid_argument("append() needs an argument");
    HZ_RETURN_IF_ERROR(in.charge(kValueBytes));
    Value item = *v;  // copy first: `x.append(x)` appends the old x
    List& l = recv.mutable_list();
    l.depth = std::max(l.depth, item.depth() + 1);
    l.items.push_back(std::move(item));
    return Value::none();
  }
  if (name == "extend") {
    const Value* v = args.get(0, "iterable");
    if (!v) return invalid_argument("extend() needs an argument");
    HZ_ASSIGN_OR_RETURN(std::vector<Value> more, iterate(in, *v));
    HZ_RETURN_IF_ERROR(in.charge(more.size() * kValueBytes));
    List& l = recv.mutable_list();
    for (Value& x : more) {
      l.depth = std::max(l.depth, x.depth() + 1);
      l.items.push_back(std::move(x));
    }
    return Value::none();
  }
  if (name == "insert") {
    const Value* idx = args.get(0, "index");
    const Value* v = args.get(1, "object");
    if (!idx || !idx->is_int() || !v) return invalid_argument("insert() needs an index and an object");
    HZ_RETURN_IF_ERROR(in.charge(kValueBytes));
    int64_t i = idx->as_int();
    if (i < 0) i += static_cast<int64_t>(n);
    i = std::clamp<int64_t>(i, 0, static_cast<int64_t>(n));
    Value item = *v;
    List& l = recv.mutable_list();
    l.depth = std::max(l.depth, item.depth() + 1);
    l.items.insert(l.items.begin() + i, std::move(item));
    return Value::none();
  }
  if (name == "pop") {
    if (n == 0) return invalid_argument("pop from an empty list");
    const Value* idx = args.get(0, "index");
    int64_t i = idx && idx->is_int() ? idx->as_int() : -1;
    if (i < 0) i += static_cast<int64_t>(n);
    if (i < 0 || i >= static_cast<int64_t>(n)) return invalid_argument("pop index out of range");
    List& l = recv.mutable_list();
    Value out = l.items[i];
    l.items.erase(l.items.begin() + i);
    return out;
  }
  const Value* x = args.get(0, "value");
  if (!x) return invalid_argument("{}() needs an argument", name);
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (values_equal(recv.as_list().items[i], *x)) {
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++count;
    }
  }
  if (name == "index") return invalid_argument("index(): value is not in the list");
  return Value::integer(count);
}

Result<Value> dict_method(Interpreter& in, const Value& recv, const std::string& name, const CallArgs& args) {
  const Dict& d = recv.as_dict();
  HZ_RETURN_IF_ERROR(in.step(1 + d.entries.size()));
  if (name == "get") {
    const Value* key = args.get(0, "key");
    if (!key) return invalid_argument("get() needs a key");
    const Value* v = key->is_string() ? d.find(key->as_string()) : nullptr;
    if (v) return *v;
    const Value* def = args.get(1, "default");
    return def ? *def : Value::none();
  }
  HZ_RETURN_IF_ERROR(in.charge(d.entries.size() * kValueBytes * (name == "items" ? 3 : 1)));
  std::vector<Value> out;
  out.reserve(d.entries.size());
  for (const auto& [k, v] : d.entries) {
    if (name == "keys") {
      out.push_back(Value::string(Text(k, d.input_keys)));
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::list({Value::string(Text(k, d.input_keys)), v}, /*is_tuple=*/true));
    }
  }
  return Value::list(std::move(out));
}

Result<Value> global_range(Interpreter& in, const CallArgs& args) {
  int64_t vals[3] = {0, 0, 1};
  size_t n = args.positional.size();
  if (n < 1 || n > 3) return invalid_argument("range() takes 1 to 3 integer arguments");
  for (size_t i = 0; i < n; ++i) {
    const Value& v = args.positional[i];
    if (!v.is_int() && !v.is_bool()) return invalid_argument("range() arguments must be integers, not {}", v.type_name());
  }
  if (n == 1) {
    vals[1] = args.positional[0].as_int();
  } else {
    vals[0] = args.positional[0].as_int();
    vals[1] = args.positional[1].as_int();
    if (n == 3) vals[2] = args.positional[2].as_int();
  }
  int64_t start = vals[0], stop = vals[1], stride = vals[2];
  if (stride == 0) return invalid_argument("range() step must not be zero");
  // Count in floating point first so that huge spans are refused before any arithmetic overflows.
  double span = (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(stride);
  uint64_t count = span <= 0 ? 0 : static_cast<uint64_t>(std::ceil(span));
  if (count > in.limits().max_steps) return in.step(count);
  HZ_RETURN_IF_ERROR(in.step(count));
  HZ_RETURN_IF_ERROR(in.charge(count * kValueBytes));
  std::vector<Value> items;
  items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) items.push_back(Value::integer(start + static_cast<int64_t>(i) * stride));
  return Value::list(std::move(items));
}

Result<Value> global_namespace(Interpreter& in, const CallArgs& args, bool is_namespace) {
  auto d = std::make_shared<Dict>();
  if (args.positional.size() > 1) return invalid_argument("namespace() takes at most one positional argument");
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (!src.is_dict()) return invalid_argument("namespace() argument must be a dict, not {}", src.type_name());
    d->input_keys = src.as_dict().input_keys;
    for (const auto& [k, v] : src.as_dict().entries) d->set(k, v);
  }
  for (const auto& [k, v] : args.keyword) {
    if (is_namespace && (v.is_namespace() || v.is_callable()))
      return invalid_argument("namespace() attribute '{}' cannot hold a {}", k, v.type_name());
    d->set(k, v);
  }
  HZ_RETURN_IF_ERROR(in.charge((d->entries.size() + 1) * (kValueBytes + 64)));
  Value out = is_namespace ? Value::namespace_(std::move(d)) : Value::dict(std::move(d));
  HZ_RETURN_IF_ERROR(in.check_value_depth(out));
  return out;
}

void add_global(Scope& g, const std::string& name, std::function<Result<Value>(Interpreter&, const CallArgs&)> f) {
  auto fn = std::make_shared<Callable>();
  fn->name = name;
  fn->invoke = std::move(f);
  g.set(name, Value::callable(std::move(fn)));
}

}  // namespace

bool has_method(const Value& v, const std::string& name) {
  if (v.is_string()) return str_methods().count(name) != 0;
  if (v.is_list()) return contains(kListMethods, name);
  if (v.is_dict()) return contains(kDictMethods, name);
  return false;
}

Result<Value> call_method(Interpreter& in, Value& receiver, const std::string& name, const CallArgs& args) {
  if (receiver.is_string()) return str_method(in, receiver.as_text(), name, args);
  if (receiver.is_list()) return list_method(in, receiver, name, args);
  if (receiver.is_dict()) return dict_method(in, receiver, name, args);
  return invalid_argument("a {} has no method '{}'", receiver.type_name(), name);
}

Value get_attribute(const Value& obj, const std::string& name) {
  if (has_method(obj, name)) {
    auto fn = std::make_shared<Callable>();
    fn->name = name;
    fn->invoke = [recv = obj, name](Interpreter& in, const CallArgs& args) mutable {
      return call_method(in, recv, name, args);
    };
    return Value::callable(std::move(fn));
  }
  if (obj.is_dict() || obj.is_namespace()) {
    const Value* v = obj.as_dict().find(name);
    if (v) return *v;
  }
  return Value();
}

Value get_item(const Value& obj, const Value& key) {
  if ((obj.is_dict() || obj.is_namespace()) && key.is_string()) {
    const Value* v = obj.as_dict().find(key.as_string());
    return v ? *v : Value();
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.as_list().items.size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? obj.as_list().items[i] : Value();
    }
    auto chars = utf8_chars(obj.as_string());
    int64_t n = static_cast<int64_t>(chars.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    size_t at = chars[i].data() - obj.as_string().data();
    return Value::string(obj.as_text().substr(at, at + chars[i].size()));
  }
  return Value();
}

Result<std::vector<Value>> iterate(Interpreter& in, const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::kUndefined: return out;
    case Value::Kind::kList:
      HZ_RETURN_IF_ERROR(in.step(v.as_list().items.size() / 16));
      return v.as_list().items;
    case Value::Kind::kDict:
      HZ_RETURN_IF_ERROR(in.step(v.as_dict().entries.size()));
      HZ_RETURN_IF_ERROR(in.charge(v.as_dict().entries.size() * kValueBytes));
      for (const auto& [k, x] : v.as_dict().entries) out.push_back(Value::string(Text(k, v.as_dict().input_keys)));
      return out;
    case Value::Kind::kString: {
      auto chars = utf8_chars(v.as_string());
      HZ_RETURN_IF_ERROR(in.step(chars.size()));
      HZ_RETURN_IF_ERROR(in.charge(chars.size() * (kValueBytes + 32)));
      for (auto c : chars) {
        size_t at = c.data() - v.as_string().data();
        out.push_back(Value::string(v.as_text().substr(at, at + c.size())));
      }
      return out;
    }
    default: return invalid_argument("a {} is not iterable", v.type_name());
  }
}

void install_globals(Scope& g) {
  add_global(g, "range", global_range);
  add_global(g, "namespace", [](Interpreter& in, const CallArgs& a) { return global_namespace(in, a, true); });
  add_global(g, "dict", [](Interpreter& in, const CallArgs& a) { return global_namespace(in, a, false); });
  add_global(g, "raise_exception", [](Interpreter&, const CallArgs& a) -> Result<Value> {
    const Value* msg = a.get(0, "message");
    return invalid_argument("raise_exception: {}", msg ? to_display(*msg) : std::string("(no message)"));
  });
  add_global(g, "strftime_now", [](Interpreter&, const CallArgs& a) -> Result<Value> {
    const Value* f = a.get(0, "format");
    if (!f || !f->is_string() || f->as_string().size() > 256) return invalid_argument("strftime_now() needs a short format string");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[1024];
    size_t n = std::strftime(buf, sizeof(buf), f->as_string().c_str(), &tm);
    return Value::string(std::string(buf, n));
  });
}

}  // namespace hz::jinja
