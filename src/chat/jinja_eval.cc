// Expression evaluation of the chat-template interpreter: operators with Python semantics
// (overflow and division by zero are errors), slices, and the expression node dispatch.
#include <cmath>
#include <limits>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"

namespace hz::jinja {
namespace {

constexpr uint64_t kValueBytes = sizeof(Value);

Result<int64_t> int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return out_of_range("integer overflow in '**'");
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return out_of_range("integer overflow in '**'");
  }
  return result;
}

Result<Value> arith(const std::string& op, const Value& a, const Value& b) {
  bool is_float = a.is_float() || b.is_float();
  if (!is_float) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    if (op == "+" || op == "-" || op == "*") {
      bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                      : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                  : __builtin_mul_overflow(x, y, &r);
      if (overflow) return out_of_range("integer overflow in '{}'", op);
      return Value::integer(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) return invalid_argument("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return out_of_range("integer overflow in '{}'", op);
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**" && y >= 0) {
      HZ_ASSIGN_OR_RETURN(int64_t p, int_pow(x, y));
      return Value::integer(p);
    }
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value::floating(x + y);
  if (op == "-") return Value::floating(x - y);
  if (op == "*") return Value::floating(x * y);
  if (op == "/" || op == "//" || op == "%") {
    if (y == 0) return invalid_argument("division by zero");
    if (op == "/") return Value::floating(x / y);
    if (op == "//") return Value::floating(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::floating(m);
  }
  if (op == "**") {
    if (x == 0 && y < 0) return invalid_argument("0.0 cannot be raised to a negative power");
    return Value::floating(std::pow(x, y));
  }
  return invalid_argument("unknown operator '{}'", op);
}

bool numeric(const Value& v) { return v.is_number() || v.is_bool(); }

}  // namespace

Result<Value> Interpreter::eval_binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_display(a) + to_display(b);
    HZ_RETURN_IF_ERROR(charge(s.size()));
    return Value::string(std::move(s));
  }
  if (a.is_undefined() || b.is_undefined())
    return invalid_argument("'{}' on an undefined value", op);
  if (numeric(a) && numeric(b)) return arith(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) {
    HZ_RETURN_IF_ERROR(charge(a.as_string().size() + b.as_string().size()));
    return Value::string(a.as_string() + b.as_string());
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    HZ_RETURN_IF_ERROR(charge((x.size() + y.size()) * kValueBytes));
    HZ_RETURN_IF_ERROR(step(x.size() + y.size()));
    std::vector<Value> items(x);
    items.insert(items.end(), y.begin(), y.end());
    return Value::list(std::move(items), a.as_list().is_tuple && b.as_list().is_tuple);
  }
  if (op == "*" && ((a.is_int() && (b.is_string() || b.is_list())) || (b.is_int() && (a.is_string() || a.is_list())))) {
    const Value& seq = a.is_int() ? b : a;
    int64_t n = std::max<int64_t>(0, a.is_int() ? a.as_int() : b.as_int());
    uint64_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().items.size() * kValueBytes;
    // Charge before allocating: "x" * 10**12 must fail, not exhaust memory.
    if (unit && static_cast<uint64_t>(n) > limits_.max_alloc_bytes / unit) return charge(limits_.max_alloc_bytes + 1);
    HZ_RETURN_IF_ERROR(charge(unit * n));
    if (seq.is_string()) {
      HZ_RETURN_IF_ERROR(step(1 + unit * n / 4096));
      std::string out;
      out.reserve(unit * n);
      for (int64_t i = 0; i < n; ++i) out += seq.as_string();
      return Value::string(std::move(out));
    }
    HZ_RETURN_IF_ERROR(step(1 + seq.as_list().items.size() * n));
    std::vector<Value> items;
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.as_list().items.begin(), seq.as_list().items.end());
    return Value::list(std::move(items), seq.as_list().is_tuple);
  }
  return invalid_argument("unsupported operand types for '{}': {} and {}", op, a.type_name(), b.type_name());
}

Result<bool> Interpreter::eval_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) return invalid_argument("'in <string>' requires a string, not {}", a.type_name());
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_list()) {
      HZ_RETURN_IF_ERROR(step(b.as_list().items.size()));
      for (const Value& x : b.as_list().items)
        if (values_equal(a, x)) found = true;
    } else if (b.is_dict() || b.is_namespace()) {
      found = a.is_string() && b.as_dict().find(a.as_string()) != nullptr;
    } else if (!b.is_undefined()) {
      return invalid_argument("argument of type {} is not iterable", b.type_name());
    }
    return op == "in" ? found : !found;
  }
  HZ_ASSIGN_OR_RETURN(int c, values_compare(a, b));
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

Result<Value> Interpreter::eval_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto bound = [](const Value& v, const char* what, bool* given, int64_t* out) -> Status {
    *given = false;
    if (v.is_undefined() || v.is_none()) return Status();
    if (!v.is_int()) return invalid_argument("slice {} must be an integer, not {}", what, v.type_name());
    *given = true;
    *out = v.as_int();
    return Status();
  };
  bool has_start, has_stop, has_step;
  int64_t start = 0, stop = 0, stride = 1;
  HZ_RETURN_IF_ERROR(bound(start_v, "start", &has_start, &start));
  HZ_RETURN_IF_ERROR(bound(stop_v, "stop", &has_stop, &stop));
  HZ_RETURN_IF_ERROR(bound(step_v, "step", &has_step, &stride));
  if (!has_step) stride = 1;
  if (stride == 0) return invalid_argument("slice step cannot be zero");
  if (obj.is_undefined()) return Value();
  std::vector<std::string_view> chars;
  const std::vector<Value>* items = nullptr;
  int64_t n;
  if (obj.is_string()) {
    chars = utf8_chars(obj.as_string());
    n = static_cast<int64_t>(chars.size());
  } else if (obj.is_list()) {
    items = &obj.as_list().items;
    n = static_cast<int64_t>(items->size());
  } else {
    return invalid_argument("a {} cannot be sliced", obj.type_name());
  }
  auto clamp = [n, stride](int64_t i) {
    if (i < 0) i += n;
    if (stride > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  start = has_start ? clamp(start) : (stride > 0 ? 0 : n - 1);
  stop = has_stop ? clamp(stop) : (stride > 0 ? n : -1);
  std::string s;
  std::vector<Value> out;
  for (int64_t i = start; stride > 0 ? i < stop : i > stop; i += stride) {
    if (items) {
      out.push_back((*items)[i]);
    } else {
      s.append(chars[i]);
    }
    if (stride > 0 ? stop - i <= stride : i - stop <= -stride) break;  // avoid overflow of i + stride
  }
  HZ_RETURN_IF_ERROR(step(out.size() + chars.size() / 64));
  if (items) {
    HZ_RETURN_IF_ERROR(charge(out.size() * kValueBytes));
    return Value::list(std::move(out), obj.as_list().is_tuple);
  }
  HZ_RETURN_IF_ERROR(charge(s.size()));
  return Value::string(std::move(s));
}

Result<Value> Interpreter::eval_inner(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.literal;
    case Expr::Kind::kName: {
      const Value* v = scope.find(e.name);
      return v ? *v : Value();
    }
    case Expr::Kind::kAttr: {
      if (e.name.empty() || e.name[0] == '_')
        return invalid_argument("access to attribute '{}' is not allowed (sandbox)", e.name);
      HZ_ASSIGN_OR_RETURN(Value obj, eval(*e.kids[0], scope));
      return get_attribute(obj, e.name);
    }
    case Expr::Kind::kItem: {
      HZ_ASSIGN_OR_RETURN(Value obj, eval(*e.kids[0], scope));
      HZ_ASSIGN_OR_RETURN(Value key, eval(*e.kids[1], scope));
      return get_item(obj, key);
    }
    case Expr::Kind::kSlice: {
      HZ_ASSIGN_OR_RETURN(Value obj, eval(*e.kids[0], scope));
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.kids[i + 1]) {
      HZ_ASSIGN_OR_RETURN(parts[i], eval(*e.kids[i + 1], scope));
    }
      return eval_slice(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall: return eval_call(e, scope, nullptr);
    case Expr::Kind::kFilter: {
      if (!e.kids[0]) return invalid_argument("filter without an operand");
      HZ_ASSIGN_OR_RETURN(Value v, eval(*e.kids[0], scope));
      CallArgs args;
      HZ_RETURN_IF_ERROR(eval_args(e, 1, scope, args));
      return apply_filter(*this, e.name, v, args);
    }
    case Expr::Kind::kTest: {
      HZ_ASSIGN_OR_RETURN(Value v, eval(*e.kids[0], scope));
      CallArgs args;
      HZ_RETURN_IF_ERROR(eval_args(e, 1, scope, args));
      HZ_ASSIGN_OR_RETURN(bool r, apply_test(*this, e.name, v, args));
      return Value::boolean(r != e.negated);
    }
    case Expr::Kind::kUnary: {
      HZ_ASSIGN_OR_RETURN(Value v, eval(*e.kids[0], scope));
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (!numeric(v)) return invalid_argument("bad operand type for unary '{}': {}", e.name, v.type_name());
      if (e.name == "+") return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::floating(-v.as_double());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) return out_of_range("integer overflow in unary '-'");
      return Value::integer(-v.as_int());
    }
    case Expr::Kind::kBinary: {
      HZ_ASSIGN_OR_RETURN(Value a, eval(*e.kids[0], scope));
      HZ_ASSIGN_OR_RETURN(Value b, eval(*e.kids[1], scope));
      return eval_binary(e.name, a, b);
    }
    case Expr::Kind::kCompare: {
      HZ_ASSIGN_OR_RETURN(Value left, eval(*e.kids[0], scope));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        HZ_ASSIGN_OR_RETURN(Value right, eval(*e.kids[i + 1], scope));
        HZ_ASSIGN_OR_RETURN(bool ok, eval_compare(e.ops[i], left, right));
        if (!ok) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::kAnd:
    case Expr::Kind::kOr: {
      HZ_ASSIGN_OR_RETURN(Value a, eval(*e.kids[0], scope));
      if (a.truthy() == (e.kind == Expr::Kind::kOr)) return a;
      return eval(*e.kids[1], scope);
    }
    case Expr::Kind::kCond: {
      HZ_ASSIGN_OR_RETURN(Value c, eval(*e.kids[1], scope));
      if (c.truthy()) return eval(*e.kids[0], scope);
      if (e.kids[2]) return eval(*e.kids[2], scope);
      return Value();
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.kids.size());
      for (const ExprPtr& k : e.kids) {
        HZ_ASSIGN_OR_RETURN(Value v, eval(*k, scope));
        items.push_back(std::move(v));
      }
      HZ_RETURN_IF_ERROR(charge(items.size() * kValueBytes + 64));
      Value v = Value::list(std::move(items), e.kind == Expr::Kind::kTuple);
      HZ_RETURN_IF_ERROR(check_value_depth(v));
      return v;
    }
    case Expr::Kind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        HZ_ASSIGN_OR_RETURN(Value k, eval(*e.kids[i], scope));
        if (!k.is_string()) return invalid_argument("dict keys must be strings, not {}", k.type_name());
        HZ_ASSIGN_OR_RETURN(Value v, eval(*e.kids[i + 1], scope));
        HZ_RETURN_IF_ERROR(charge(kValueBytes + k.as_string().size() + 64));
        d->set(k.as_string(), std::move(v));
      }
      Value v = Value::dict(std::move(d));
      HZ_RETURN_IF_ERROR(check_value_depth(v));
      return v;
    }
  }
  return invalid_argument("unknown expression");
}

}  // namespace hz::jinja
