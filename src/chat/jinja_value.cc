// Runtime values of the chat-template interpreter: construction, Python renderings, JSON.
#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hz::jinja {

Value Value::string(std::string s) {
  Value v(Kind::kString);
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  l->recompute_depth();
  return list(std::move(l));
}

Value Value::list(std::shared_ptr<List> list) {
  Value v(Kind::kList);
  v.list_ = std::move(list);
  return v;
}

Value Value::dict(std::shared_ptr<Dict> dict) {
  Value v(Kind::kDict);
  v.dict_ = std::move(dict);
  return v;
}

Value Value::namespace_(std::shared_ptr<Dict> attrs) {
  Value v(Kind::kNamespace);
  v.dict_ = std::move(attrs);
  return v;
}

Value Value::callable(std::shared_ptr<const Callable> fn) {
  Value v(Kind::kCallable);
  v.fn_ = std::move(fn);
  return v;
}

List& Value::mutable_list() {
  if (list_.use_count() > 1) list_ = std::make_shared<List>(*list_);
  return *list_;
}

Dict& Value::mutable_dict() {
  // Namespaces are shared on purpose (Jinja semantics); only plain dicts copy on write.
  if (kind_ == Kind::kDict && dict_.use_count() > 1) dict_ = std::make_shared<Dict>(*dict_);
  return *dict_;
}

int Value::depth() const {
  switch (kind_) {
    case Kind::kList: return list_->depth;
    case Kind::kDict:
    case Kind::kNamespace: return dict_->depth;
    default: return 0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !s_->empty();
    case Kind::kList: return !list_->items.empty();
    case Kind::kDict: return !dict_->entries.empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return list_->is_tuple ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "namespace";
    case Kind::kCallable: return "function";
  }
  return "?";
}

void List::recompute_depth() {
  depth = 1;
  for (const Value& v : items) depth = std::max(depth, v.depth() + 1);
}

void Dict::recompute_depth() {
  depth = 1;
  for (const auto& e : entries) depth = std::max(depth, e.second.depth() + 1);
}

const Value* Dict::find(std::string_view key) const {
  auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void Dict::set(const std::string& key, Value v) {
  depth = std::max(depth, v.depth() + 1);
  auto it = index.find(key);
  if (it != index.end()) {
    entries[it->second].second = std::move(v);
    return;
  }
  index.emplace(key, entries.size());
  entries.emplace_back(key, std::move(v));
}

bool Dict::erase(const std::string& key) {
  auto it = index.find(key);
  if (it == index.end()) return false;
  entries.erase(entries.begin() + it->second);
  index.clear();
  for (size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].first, i);
  return true;
}

const Value* CallArgs::get(size_t idx, std::string_view name) const {
  if (idx < positional.size()) return &positional[idx];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest digits that round-trip, then Python's layout rule: scientific when the decimal
  // exponent is < -4 or >= 16.
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s(buf);
  size_t epos = s.find('e');
  int exp = std::atoi(s.c_str() + epos + 1);
  std::string mant = s.substr(0, epos);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  } else if (exp < 0) {
    out = "0." + std::string(-exp - 1, '0') + digits;
  } else if (static_cast<int>(digits.size()) <= exp + 1) {
    out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
  }
  return neg ? "-" + out : out;
}

namespace {

void repr_string(const std::string& s, std::string& out) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
}

void repr_into(const Value& v, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::kString: repr_string(v.as_string(), out); return;
    case Value::Kind::kList: {
      const List& l = v.as_list();
      out += l.is_tuple ? '(' : '[';
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        repr_into(l.items[i], out);
      }
      if (l.is_tuple && l.items.size() == 1) out += ',';
      out += l.is_tuple ? ')' : ']';
      return;
    }
    case Value::Kind::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        repr_string(k, out);
        out += ": ";
        repr_into(e, out);
      }
      out += '}';
      return;
    }
    default: out += to_display(v);
  }
}

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else if (ensure_ascii && c >= 0x80) {
          // Decode one UTF-8 sequence; invalid bytes are escaped as themselves.
          uint32_t cp = c;
          int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
          if (extra && i + extra < s.size() + 0) {
            cp = c & (0x3f >> extra);
            for (int k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
            i += extra;
          }
          char buf[16];
          if (cp >= 0x10000) {
            cp -= 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
          }
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

Status json_into(const Value& v, const JsonFormat& fmt, int level, std::string& out) {
  auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(fmt.indent) * lvl, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return Status();
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status();
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return Status();
    case Value::Kind::kFloat: {
      double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : format_float(d);
      return Status();
    }
    case Value::Kind::kString: json_string(v.as_string(), fmt.ensure_ascii, out); return Status();
    case Value::Kind::kList: {
      const auto& items = v.as_list().items;
      if (items.empty()) {
        out += "[]";
        return Status();
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += fmt.item_sep;
        if (fmt.indent >= 0) newline(level + 1);
        HZ_RETURN_IF_ERROR(json_into(items[i], fmt, level + 1, out));
      }
      if (fmt.indent >= 0) newline(level);
      out += ']';
      return Status();
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.as_dict().entries) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return Status();
      }
      if (fmt.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += fmt.item_sep;
        if (fmt.indent >= 0) newline(level + 1);
        json_string(entries[i]->first, fmt.ensure_ascii, out);
        out += fmt.key_sep;
        HZ_RETURN_IF_ERROR(json_into(entries[i]->second, fmt, level + 1, out));
      }
      if (fmt.indent >= 0) newline(level);
      out += '}';
      return Status();
    }
    case Value::Kind::kCallable: return invalid_argument("tojson: a function is not JSON serializable");
  }
  return Status();
}

template <typename J>
Result<Value> from_json_impl(const J& j, int depth_left) {
  if (depth_left < 0) return invalid_argument("template input: JSON nested too deeply");
  switch (j.type()) {
    case J::value_t::null: return Value::none();
    case J::value_t::boolean: return Value::boolean(j.template get<bool>());
    case J::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case J::value_t::number_float: return Value::floating(j.template get<double>());
    case J::value_t::string: return Value::string(j.template get<std::string>());
    case J::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        HZ_ASSIGN_OR_RETURN(Value v, from_json_impl(e, depth_left - 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case J::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it) {
        HZ_ASSIGN_OR_RETURN(Value v, from_json_impl(it.value(), depth_left - 1));
        d->set(it.key(), std::move(v));
      }
      return Value::dict(std::move(d));
    }
    default: return invalid_argument("template input: unsupported JSON value (binary or discarded)");
  }
}

}  // namespace

std::string to_display(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return format_float(v.as_double());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kNamespace: return "<Namespace>";
    case Value::Kind::kCallable: return "<function " + v.as_callable().name + ">";
    default: {
      std::string out;
      repr_into(v, out);
      return out;
    }
  }
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(v, out);
  return out;
}

Result<std::string> to_json(const Value& v, const JsonFormat& fmt) {
  std::string out;
  HZ_RETURN_IF_ERROR(json_into(v, fmt, 0, out));
  return out;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() || a.is_bool()) {
    if (!(b.is_number() || b.is_bool())) return false;
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const auto& x = a.as_list().items;
      const auto& y = b.as_list().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* o = y.find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return a.dict_ptr() == b.dict_ptr();
    case Value::Kind::kCallable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

Result<int> values_compare(const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      HZ_ASSIGN_OR_RETURN(int c, values_compare(x[i], y[i]));
      if (c) return c;
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return invalid_argument("cannot compare {} with {}", a.type_name(), b.type_name());
}

Result<Value> from_json(const nlohmann::json& j, int max_depth) { return from_json_impl(j, max_depth); }
Result<Value> from_json(const nlohmann::ordered_json& j, int max_depth) { return from_json_impl(j, max_depth); }

}  // namespace hz::jinja
