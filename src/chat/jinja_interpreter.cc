// Tree-walking interpreter of the chat-template language (see jinja_interpreter.h).
#include "chat/jinja_interpreter.h"

#include <cmath>
#include <limits>

#include "base/check.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"

namespace hz::jinja {
namespace {

constexpr uint64_t kValueBytes = sizeof(Value);

// Counts evaluation frames on entry; the check bounds native stack use.
class Frame {
 public:
  explicit Frame(int* frames) : frames_(frames) { ++*frames_; }
  ~Frame() { --*frames_; }

 private:
  int* frames_;
};

Status resource_error(const std::string& what) { return Status(StatusCode::kResourceExhausted, what); }

// Namespaces are the only shared mutable objects; keeping namespaces and callables out of
// them rules out reference cycles and dangling caller scopes.
Status check_storable_in_namespace(const Value& v) {
  if (v.is_namespace()) return invalid_argument("a namespace cannot be stored in a namespace");
  if (v.is_callable()) return invalid_argument("a function cannot be stored in a namespace");
  if (v.is_list())
    for (const Value& x : v.as_list().items) HZ_RETURN_IF_ERROR(check_storable_in_namespace(x));
  if (v.is_dict())
    for (const auto& [k, x] : v.as_dict().entries) HZ_RETURN_IF_ERROR(check_storable_in_namespace(x));
  return Status();
}

}  // namespace

Value* Scope::find(const std::string& name) {
  for (Scope* s = this; s; s = s->parent_) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

Value* Scope::find_local(const std::string& name) {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    if (i + len > s.size()) len = 1;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) len = 1;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

Status Interpreter::step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    return resource_error(fmt::format("chat template exceeded max_steps ({})", limits_.max_steps));
  return Status();
}

Status Interpreter::charge(uint64_t bytes) {
  alloc_bytes_ += bytes;
  if (alloc_bytes_ > limits_.max_alloc_bytes)
    return resource_error(fmt::format("chat template exceeded max_alloc_bytes ({})", limits_.max_alloc_bytes));
  return Status();
}

Status Interpreter::check_value_depth(const Value& v) const {
  if (v.depth() > limits_.max_depth)
    return resource_error(fmt::format("chat template value nested deeper than max_depth ({})", limits_.max_depth));
  return Status();
}

Status Interpreter::with_position(Status s, size_t offset) const {
  if (s.ok()) return s;
  // Limit errors keep their code; every error gets the innermost template position once.
  if (s.message().rfind("chat template", 0) == 0 && s.message().find(" at line ") != std::string::npos) return s;
  return Status(s.code(), fmt::format("chat template error at {}: {}", describe_position(source_, offset), s.message()));
}

Status Interpreter::emit(Text& out, const Text& text) {
  if (out.size() + text.size() > limits_.max_output_bytes)
    return resource_error(fmt::format("chat template output exceeds max_output_bytes ({})", limits_.max_output_bytes));
  out.append(text);
  return Status();
}

Status Interpreter::emit(Text& out, std::string_view template_text) {
  if (out.size() + template_text.size() > limits_.max_output_bytes)
    return resource_error(fmt::format("chat template output exceeds max_output_bytes ({})", limits_.max_output_bytes));
  out.append(template_text, /*from_input=*/false);
  return Status();
}

Result<Text> Interpreter::render(const Body& body, Scope& globals) {
  Scope top(&globals);
  top_ = &top;
  Text out;
  Status s = exec_body(body, top, out);
  top_ = nullptr;
  if (!s.ok()) return s;
  return out;
}

Status Interpreter::exec_body(const Body& body, Scope& scope, Text& out) {
  for (const StmtPtr& s : body) {
    HZ_RETURN_IF_ERROR(exec(*s, scope, out));
    if (flow_ != Flow::kNormal) break;
  }
  return Status();
}

Status Interpreter::exec(const Stmt& s, Scope& scope, Text& out) {
  Frame frame(&frames_);
  if (frames_ > 16 * limits_.max_depth)
    return with_position(resource_error("chat template evaluation nested too deeply"), s.offset);
  HZ_RETURN_IF_ERROR(step());
  switch (s.kind) {
    case Stmt::Kind::kText: return emit(out, std::string_view(s.text));
    case Stmt::Kind::kOutput: {
      auto v = eval(*s.exprs[0], scope);
      if (!v.ok()) return v.status();
      if (v->is_string()) return emit(out, v->as_text());
      return emit(out, to_text(*v));
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.exprs.size(); ++i) {
        HZ_ASSIGN_OR_RETURN(Value c, eval(*s.exprs[i], scope));
        if (c.truthy()) return exec_body(s.bodies[i], scope, out);
      }
      return exec_body(s.bodies.back(), scope, out);
    case Stmt::Kind::kFor: return exec_for(s, scope, out);
    case Stmt::Kind::kSet: return exec_set(s, scope);
    case Stmt::Kind::kSetBlock: {
      Text captured;
      HZ_RETURN_IF_ERROR(exec_body(s.bodies[0], scope, captured));
      HZ_RETURN_IF_ERROR(charge(captured.size()));
      scope.set(s.targets[0], Value::string(std::move(captured)));
      return Status();
    }
    case Stmt::Kind::kMacro: {
      auto fn = std::make_shared<Callable>();
      fn->name = s.text;
      const Stmt* macro = &s;
      fn->invoke = [macro](Interpreter& in, const CallArgs& args) { return in.call_macro(*macro, args); };
      scope.set(s.text, Value::callable(std::move(fn)));
      return Status();
    }
    case Stmt::Kind::kCallBlock: {
      auto fn = std::make_shared<Callable>();
      fn->name = "caller";
      const Stmt* block = &s;
      Scope* where = &scope;  // alive for the whole call; callers cannot be stored in namespaces
      fn->invoke = [block, where](Interpreter& in, const CallArgs& args) { return in.call_caller(*block, where, args); };
      Value caller = Value::callable(std::move(fn));
      HZ_ASSIGN_OR_RETURN(Value v, eval_call(*s.exprs[0], scope, &caller));
      return emit(out, to_text(v));
    }
    case Stmt::Kind::kFilterBlock: {
      Text captured;
      HZ_RETURN_IF_ERROR(exec_body(s.bodies[0], scope, captured));
      HZ_RETURN_IF_ERROR(charge(captured.size()));
      Value v = Value::string(std::move(captured));
      for (const ExprPtr& f : s.exprs) {
        CallArgs args;
        HZ_RETURN_IF_ERROR(with_position(eval_args(*f, 1, scope, args), f->offset));
        auto r = apply_filter(*this, f->name, v, args);
        if (!r.ok()) return with_position(r.status(), f->offset);
        v = std::move(r).value();
      }
      return emit(out, to_text(v));
    }
    case Stmt::Kind::kBreak: flow_ = Flow::kBreak; return Status();
    case Stmt::Kind::kContinue: flow_ = Flow::kContinue; return Status();
  }
  return Status();
}

Status Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
  if (targets.size() == 1) {
    scope.set(targets[0], v);
    return Status();
  }
  if (!v.is_list()) return invalid_argument("cannot unpack a {} into {} names", v.type_name(), targets.size());
  const auto& items = v.as_list().items;
  if (items.size() != targets.size())
    return invalid_argument("cannot unpack {} values into {} names", items.size(), targets.size());
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
  return Status();
}

Status Interpreter::exec_for(const Stmt& s, Scope& scope, Text& out) {
  HZ_ASSIGN_OR_RETURN(Value iterable, eval(*s.exprs[0], scope));
  auto items_r = iterate(*this, iterable);
  if (!items_r.ok()) return with_position(items_r.status(), s.exprs[0]->offset);
  std::vector<Value> items = std::move(items_r).value();
  Scope loop_scope(&scope);
  if (s.exprs.size() > 1) {  // for x in xs if cond
    std::vector<Value> kept;
    for (Value& item : items) {
      HZ_RETURN_IF_ERROR(step());
      HZ_RETURN_IF_ERROR(with_position(bind_targets(s.targets, item, loop_scope), s.offset));
      HZ_ASSIGN_OR_RETURN(Value keep, eval(*s.exprs[1], loop_scope));
      if (keep.truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  static const char* kKeys[] = {"index", "index0", "revindex", "revindex0", "first",
                                "last",  "length", "previtem", "nextitem"};
  Value loop;
  for (int64_t i = 0; i < n; ++i) {
    HZ_RETURN_IF_ERROR(step());
    // Reuse the loop object unless the template kept a reference to it.
    if (!loop.is_dict() || loop.dict_ptr().use_count() > 2) {
      HZ_RETURN_IF_ERROR(charge(std::size(kKeys) * (kValueBytes + 48)));
      auto d = std::make_shared<Dict>();
      for (const char* k : kKeys) d->set(k, Value());
      loop = Value::dict(std::move(d));
    }
    auto& e = loop.dict_ptr()->entries;
    e[0].second = Value::integer(i + 1);
    e[1].second = Value::integer(i);
    e[2].second = Value::integer(n - i);
    e[3].second = Value::integer(n - i - 1);
    e[4].second = Value::boolean(i == 0);
    e[5].second = Value::boolean(i == n - 1);
    e[6].second = Value::integer(n);
    e[7].second = i > 0 ? items[i - 1] : Value();
    e[8].second = i + 1 < n ? items[i + 1] : Value();
    loop.dict_ptr()->recompute_depth();
    loop_scope.set("loop", loop);
    HZ_RETURN_IF_ERROR(with_position(bind_targets(s.targets, items[i], loop_scope), s.offset));
    HZ_RETURN_IF_ERROR(exec_body(s.bodies[0], loop_scope, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  if (n == 0) return exec_body(s.bodies[1], loop_scope, out);
  return Status();
}

Status Interpreter::exec_set(const Stmt& s, Scope& scope) {
  HZ_ASSIGN_OR_RETURN(Value v, eval(*s.exprs[0], scope));
  if (s.targets.empty()) return Status();  // {% do %}
  if (!s.attr.empty()) {
    Value* ns = scope.find(s.targets[0]);
    if (!ns || !ns->is_namespace())
      return with_position(invalid_argument("cannot set attribute '{}' on '{}': not a namespace", s.attr, s.targets[0]),
                           s.offset);
    if (s.attr[0] == '_') return with_position(invalid_argument("attribute names starting with '_' are not allowed"), s.offset);
    HZ_RETURN_IF_ERROR(with_position(check_storable_in_namespace(v), s.offset));
    HZ_RETURN_IF_ERROR(charge(kValueBytes + s.attr.size()));
    ns->dict_ptr()->set(s.attr, std::move(v));
    return with_position(check_value_depth(*ns), s.offset);
  }
  return with_position(bind_targets(s.targets, v, scope), s.offset);
}

Result<Value> Interpreter::eval(const Expr& e, Scope& scope) {
  Frame frame(&frames_);
  if (frames_ > 16 * limits_.max_depth) return with_position(resource_error("chat template evaluation nested too deeply"), e.offset);
  HZ_RETURN_IF_ERROR(step());
  auto r = eval_inner(e, scope);
  if (!r.ok()) return with_position(r.status(), e.offset);
  return r;
}

Status Interpreter::eval_args(const Expr& e, size_t first, Scope& scope, CallArgs& args) {
  size_t num_kw = e.kw_names.size();
  size_t num_pos = e.kids.size() - first - num_kw;
  for (size_t i = 0; i < num_pos; ++i) {
    HZ_ASSIGN_OR_RETURN(Value v, eval(*e.kids[first + i], scope));
    args.positional.push_back(std::move(v));
  }
  for (size_t i = 0; i < num_kw; ++i) {
    HZ_ASSIGN_OR_RETURN(Value v, eval(*e.kids[first + num_pos + i], scope));
    args.keyword.emplace_back(e.kw_names[i], std::move(v));
  }
  return Status();
}

Value* Interpreter::resolve_lvalue(const Expr& e, Scope& scope) {
  if (e.kind == Expr::Kind::kName) return scope.find(e.name);
  if (e.kind == Expr::Kind::kAttr && !e.name.empty() && e.name[0] != '_') {
    Value* obj = resolve_lvalue(*e.kids[0], scope);
    if (obj && obj->is_namespace()) {
      const Value* v = obj->as_dict().find(e.name);
      return const_cast<Value*>(v);  // namespaces are mutable by design
    }
  }
  return nullptr;
}

Result<Value> Interpreter::eval_call(const Expr& e, Scope& scope, const Value* caller) {
  CallArgs args;
  HZ_RETURN_IF_ERROR(eval_args(e, 1, scope, args));
  if (caller) args.keyword.emplace_back("caller", *caller);
  const Expr& callee = *e.kids[0];
  if (callee.kind == Expr::Kind::kAttr) {
    if (callee.name.empty() || callee.name[0] == '_')
      return invalid_argument("access to attribute '{}' is not allowed", callee.name);
    // Resolved after the arguments: evaluating them may reshape the namespace holding it.
    Value* ref = resolve_lvalue(*callee.kids[0], scope);
    Value tmp;
    if (!ref) {
      HZ_ASSIGN_OR_RETURN(tmp, eval(*callee.kids[0], scope));
      ref = &tmp;
    }
    if (has_method(*ref, callee.name)) {
      auto r = call_method(*this, *ref, callee.name, args);
      if (r.ok() && ref != &tmp) HZ_RETURN_IF_ERROR(check_value_depth(*ref));
      return r;
    }
    Value fn = get_attribute(*ref, callee.name);
    if (!fn.is_callable()) return invalid_argument("'{}' of a {} is not callable", callee.name, ref->type_name());
    return call(fn, args);
  }
  HZ_ASSIGN_OR_RETURN(Value fn, eval(callee, scope));
  if (!fn.is_callable()) {
    if (callee.kind == Expr::Kind::kName) return invalid_argument("'{}' is undefined or not callable", callee.name);
    return invalid_argument("a {} is not callable", fn.type_name());
  }
  return call(fn, args);
}

Result<Value> Interpreter::call(const Value& fn, const CallArgs& args) {
  HZ_CHECK(fn.is_callable());
  return fn.as_callable().invoke(*this, args);
}

Status Interpreter::enter_macro() {
  if (macro_depth_ >= limits_.max_depth)
    return resource_error(fmt::format("chat template macro recursion deeper than max_depth ({})", limits_.max_depth));
  ++macro_depth_;
  return Status::ok_status();
}

Result<Value> Interpreter::call_macro(const Stmt& m, const CallArgs& args) {
  HZ_RETURN_IF_ERROR(enter_macro());
  MacroDepthGuard guard{&macro_depth_};
  Scope scope(top_);
  size_t num_params = m.targets.size();
  std::vector<bool> bound(num_params, false);
  for (size_t i = 0; i < args.positional.size() && i < num_params; ++i) {
    scope.set(m.targets[i], args.positional[i]);
    bound[i] = true;
  }
  std::vector<Value> varargs;
  for (size_t i = num_params; i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
  auto kwargs = std::make_shared<Dict>();
  for (const auto& [k, v] : args.keyword) {
    bool matched = false;
    for (size_t i = 0; i < num_params; ++i) {
      if (m.targets[i] == k) {
        if (bound[i]) return invalid_argument("macro '{}' got multiple values for argument '{}'", m.text, k);
        scope.set(k, v);
        bound[i] = matched = true;
      }
    }
    if (!matched && k == "caller") {
      scope.set(k, v);
    } else if (!matched) {
      kwargs->set(k, v);
    }
  }
  for (size_t i = 0; i < num_params; ++i) {
    if (bound[i]) continue;
    if (m.exprs[i]) {
      HZ_ASSIGN_OR_RETURN(Value d, eval(*m.exprs[i], scope));
      scope.set(m.targets[i], std::move(d));
    } else {
      scope.set(m.targets[i], Value());
    }
  }
  scope.set("varargs", Value::list(std::move(varargs)));
  scope.set("kwargs", Value::dict(std::move(kwargs)));
  Text out;
  Flow saved = flow_;
  flow_ = Flow::kNormal;
  HZ_RETURN_IF_ERROR(exec_body(m.bodies[0], scope, out));
  flow_ = saved;
  HZ_RETURN_IF_ERROR(charge(out.size()));
  return Value::string(std::move(out));
}

Result<Value> Interpreter::call_caller(const Stmt& block, Scope* where, const CallArgs& args) {
  HZ_RETURN_IF_ERROR(enter_macro());
  MacroDepthGuard guard{&macro_depth_};
  Scope scope(where);
  for (size_t i = 0; i < block.targets.size(); ++i) {
    const Value* v = args.get(i, block.targets[i]);
    if (v) {
      scope.set(block.targets[i], *v);
    } else if (block.exprs.size() > i + 1 && block.exprs[i + 1]) {
      HZ_ASSIGN_OR_RETURN(Value d, eval(*block.exprs[i + 1], scope));
      scope.set(block.targets[i], std::move(d));
    } else {
      scope.set(block.targets[i], Value());
    }
  }
  Text out;
  Flow saved = flow_;
  flow_ = Flow::kNormal;
  HZ_RETURN_IF_ERROR(exec_body(block.bodies[0], scope, out));
  flow_ = saved;
  HZ_RETURN_IF_ERROR(charge(out.size()));
  return Value::string(std::move(out));
}

}  // namespace hz::jinja
