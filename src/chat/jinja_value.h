// Runtime values of the chat-template interpreter (a sandboxed Jinja subset): Python-like
// none/bool/int/float/str/list/dict, Jinja's Undefined, namespaces and callables.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace hz::jinja {

struct List;
struct Dict;
struct Callable;

// A value. Strings, lists and dicts are immutable once shared: list/dict mutation methods
// (append, pop, ...) copy on write when the container has more than one owner, so values
// never form cycles. Namespaces are the one shared mutable object (Jinja semantics); they may
// not hold namespaces or callables (checked on assignment), which keeps them acyclic too.
class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() = default;
  static Value none() { return Value(Kind::kNone); }
  static Value boolean(bool b) { Value v(Kind::kBool); v.i_ = b ? 1 : 0; return v; }
  static Value integer(int64_t i) { Value v(Kind::kInt); v.i_ = i; return v; }
  static Value floating(double f) { Value v(Kind::kFloat); v.f_ = f; return v; }
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value list(std::shared_ptr<List> list);
  static Value dict(std::shared_ptr<Dict> dict);
  static Value namespace_(std::shared_ptr<Dict> attrs);
  static Value callable(std::shared_ptr<const Callable> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& as_string() const { return *s_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }  // dicts and namespaces
  const std::shared_ptr<Dict>& dict_ptr() const { return dict_; }
  const std::shared_ptr<List>& list_ptr() const { return list_; }
  const Callable& as_callable() const { return *fn_; }
  // Mutable access for in-place methods; copies the container first if it is shared.
  List& mutable_list();
  Dict& mutable_dict();

  // Nesting depth: 0 for scalars, 1 + the deepest element for containers.
  int depth() const;
  bool truthy() const;
  const char* type_name() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> fn_;
};

struct List {
  std::vector<Value> items;
  bool is_tuple = false;
  int depth = 1;
  void recompute_depth();
};

// An insertion-ordered dict with string keys (JSON objects; Python dicts in templates).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  std::unordered_map<std::string, size_t> index;
  int depth = 1;

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
  bool erase(const std::string& key);
  void recompute_depth();
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The positional argument at `idx`, else the keyword `name`, else nullptr.
  const Value* get(size_t idx, std::string_view name) const;
};

class Interpreter;
// A builtin function, bound method or macro. `invoke` gets the interpreter for limits and output.
struct Callable {
  std::string name;
  std::function<Result<Value>(Interpreter&, const CallArgs&)> invoke;
};

// Python-compatible renderings.
std::string to_display(const Value& v);  // str(v): what {{ v }} prints
std::string to_repr(const Value& v);     // repr(v), used inside containers
std::string format_float(double d);      // Python float repr: 1.0, 0.1, 1e-05, 1e+16

struct JsonFormat {
  int indent = -1;  // < 0: single line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps as transformers' tojson filter calls it; undefined renders as null.
Result<std::string> to_json(const Value& v, const JsonFormat& fmt);

// Python equality (1 == 1.0, deep for containers) and ordering for sort/compare.
bool values_equal(const Value& a, const Value& b);
// <0, 0, >0; an error for types Python cannot order (e.g. str vs int).
Result<int> values_compare(const Value& a, const Value& b);

// Conversion from JSON input (messages, tools, extra variables). Nesting deeper than
// `max_depth` is refused.
Result<Value> from_json(const nlohmann::json& j, int max_depth);
Result<Value> from_json(const nlohmann::ordered_json& j, int max_depth);

}  // namespace hz::jinja
