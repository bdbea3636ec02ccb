// Tree-walking interpreter of the chat-template language with hard limits: output bytes,
// steps, nesting depth and cumulative allocation. A hostile template ends with an error Status.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "chat/jinja_ast.h"

namespace hz::jinja {

struct Limits {
  size_t max_output_bytes = 1 << 20;  // per rendered string (the result, macro and block captures)
  uint64_t max_steps = 10'000'000;    // evaluated nodes, loop iterations and builtin work items
  int max_depth = 64;                 // macro recursion, value nesting; 16x this for evaluation frames
  uint64_t max_alloc_bytes = 64 << 20;  // cumulative bytes of strings and containers created
};

// A variable scope. Lookups walk up to the globals; assignments stay local (Jinja scoping:
// `set` inside a for loop or macro does not leak out).
class Scope {
 public:
  explicit Scope(Scope* parent) : parent_(parent) {}
  Value* find(const std::string& name);
  Value* find_local(const std::string& name);
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  Scope* parent_;
  std::unordered_map<std::string, Value> vars_;
};

class Interpreter {
 public:
  // `source` is the template text, used for line:col in errors; it must outlive the interpreter.
  Interpreter(const Limits& limits, std::string_view source) : limits_(limits), source_(source) {}

  // Renders `body` with `globals` (builtins and caller variables) as the outermost scope. The
  // result says which of its bytes came from input data (see Text).
  Result<Text> render(const Body& body, Scope& globals);

  // Budget accounting used by the builtins.
  Status step(uint64_t n = 1);
  Status charge(uint64_t bytes);
  Status check_value_depth(const Value& v) const;
  const Limits& limits() const { return limits_; }

  // Calls a callable value (builtin, bound method, macro, caller).
  Result<Value> call(const Value& fn, const CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Status exec_body(const Body& body, Scope& scope, Text& out);
  Status exec(const Stmt& s, Scope& scope, Text& out);
  Status exec_for(const Stmt& s, Scope& scope, Text& out);
  Status exec_set(const Stmt& s, Scope& scope);
  Status emit(Text& out, const Text& text);
  Status emit(Text& out, std::string_view template_text);
  Result<Value> eval(const Expr& e, Scope& scope);
  Result<Value> eval_inner(const Expr& e, Scope& scope);
  Result<Value> eval_call(const Expr& e, Scope& scope, const Value* caller);
  Status eval_args(const Expr& e, size_t first, Scope& scope, CallArgs& args);
  Result<Value> eval_binary(const std::string& op, const Value& a, const Value& b);
  Result<bool> eval_compare(const std::string& op, const Value& a, const Value& b);
  Result<Value> eval_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  Value* resolve_lvalue(const Expr& e, Scope& scope);
  Status bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope);
  Result<Value> call_macro(const Stmt& macro, const CallArgs& args);
  Result<Value> call_caller(const Stmt& call_block, Scope* scope, const CallArgs& args);
  Status with_position(Status s, size_t offset) const;

  Limits limits_;
  std::string_view source_;
  Scope* top_ = nullptr;  // template-level scope; macros resolve names from here
  uint64_t steps_ = 0;
  uint64_t alloc_bytes_ = 0;
  int frames_ = 0;
  // Counts one macro or caller() call against limits_.max_depth; MacroDepthGuard undoes it.
  Status enter_macro();
  struct MacroDepthGuard {
    int* depth;
    ~MacroDepthGuard() { --*depth; }
  };
  int macro_depth_ = 0;
  Flow flow_ = Flow::kNormal;
};

// Splits a UTF-8 string into code points (invalid bytes stand alone), as Python iterates str.
std::vector<std::string_view> utf8_chars(std::string_view s);

}  // namespace hz::jinja
