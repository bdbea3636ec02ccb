// Parser of the chat-template language (see jinja_parser.h): recursive descent following
// Jinja's precedence (cond < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary
// < postfix and filters).
#include "chat/jinja_parser.h"

#include <algorithm>
#include <cstdlib>

#include "chat/jinja_lexer.h"

namespace hz::jinja {
namespace {

class Parser {
 public:
  Parser(std::string_view src, std::vector<Token> tokens, int max_depth)
      : src_(src), toks_(std::move(tokens)), max_depth_(max_depth) {}

  Result<Body> parse_all() {
    std::string hit;
    HZ_ASSIGN_OR_RETURN(Body body, parse_body({}, &hit));
    return body;
  }

 private:
  // Counts nesting on entry, so that recursion is bounded before it happens.
  class Nest {
   public:
    explicit Nest(Parser* p) : p_(p) { ++p_->nest_; }
    ~Nest() { --p_->nest_; }
    Status check() const {
      if (p_->nest_ > p_->max_depth_)
        return p_->error_at(p_->peek().offset, "template nested too deeply (max_depth " +
                                                   std::to_string(p_->max_depth_) + ")");
      return Status();
    }

   private:
    Parser* p_;
  };

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOp && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  Status error_at(size_t offset, const std::string& msg) const {
    return invalid_argument("chat template syntax error at {}: {}", describe_position(src_, offset), msg);
  }
  Status unexpected(const std::string& wanted) const {
    const Token& t = peek();
    std::string got = t.kind == TokenKind::kEof        ? "end of template"
                      : t.kind == TokenKind::kBlockEnd ? "'%}'"
                      : t.kind == TokenKind::kVarEnd   ? "'}}'"
                      : t.kind == TokenKind::kText     ? "text"
                      : t.kind == TokenKind::kString   ? "a string"
                                                       : "'" + t.text + "'";
    return error_at(t.offset, "expected " + wanted + ", got " + got);
  }
  Status expect_op(std::string_view op) {
    if (!is_op(op)) return unexpected("'" + std::string(op) + "'");
    next();
    return Status();
  }
  Status expect_block_end() {
    if (peek().kind != TokenKind::kBlockEnd) return unexpected("'%}'");
    next();
    return Status();
  }
  Result<std::string> expect_name() {
    if (peek().kind != TokenKind::kName) return unexpected("a name");
    return next().text;
  }
  ExprPtr node(Expr::Kind kind, size_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    return e;
  }
  // Sets the subtree height and bounds it: evaluation recurses over it.
  Status seal(Expr& e) {
    e.depth = 1;
    for (const auto& k : e.kids)
      if (k) e.depth = std::max(e.depth, k->depth + 1);
    if (e.depth > 4 * max_depth_) return error_at(e.offset, "expression nested too deeply");
    return Status();
  }

  Result<Body> parse_body(const std::vector<std::string_view>& ends, std::string* hit);
  Result<StmtPtr> parse_statement();
  Status parse_for(Stmt& s);
  Status parse_set(Stmt& s);
  Status parse_params(Stmt& s);

  Result<ExprPtr> parse_expression(bool with_cond = true);
  Result<ExprPtr> parse_tuple_or_expression();
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> parse_binary_level(int level);
  Result<ExprPtr> parse_unary(bool with_filter);
  Result<ExprPtr> parse_primary();
  Result<ExprPtr> parse_postfix(ExprPtr e);
  Result<ExprPtr> parse_filter_expr(ExprPtr e);
  Result<ExprPtr> parse_filter(ExprPtr operand);
  Status parse_call_args(Expr& call);

  std::string_view src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int max_depth_;
  int nest_ = 0;
  int loop_depth_ = 0;
};

Result<Body> Parser::parse_body(const std::vector<std::string_view>& ends, std::string* hit) {
  Body body;
  for (;;) {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kText: {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->offset = t.offset;
        s->text = next().text;
        body.push_back(std::move(s));
        break;
      }
      case TokenKind::kVarBegin: {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->offset = next().offset;
        HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple_or_expression());
        s->exprs.push_back(std::move(e));
        if (peek().kind != TokenKind::kVarEnd) return unexpected("'}}'");
        next();
        body.push_back(std::move(s));
        break;
      }
      case TokenKind::kBlockBegin: {
        const Token& name = peek(1);
        if (name.kind == TokenKind::kName && std::find(ends.begin(), ends.end(), name.text) != ends.end()) {
          next();
          *hit = next().text;
          return body;
        }
        HZ_ASSIGN_OR_RETURN(StmtPtr s, parse_statement());
        if (s) body.push_back(std::move(s));
        break;
      }
      case TokenKind::kEof:
        if (!ends.empty())
          return error_at(t.offset, "unexpected end of template, expected {% " + std::string(ends.back()) + " %}");
        return body;
      default: return unexpected("text or a tag");
    }
  }
}

Result<StmtPtr> Parser::parse_statement() {
  Nest nest(this);
  HZ_RETURN_IF_ERROR(nest.check());
  size_t offset = next().offset;  // {%
  if (peek().kind != TokenKind::kName) return unexpected("a statement name");
  std::string kw = next().text;
  auto s = std::make_unique<Stmt>();
  s->offset = offset;
  std::string hit;
  if (kw == "if") {
    s->kind = Stmt::Kind::kIf;
    for (;;) {
      HZ_ASSIGN_OR_RETURN(ExprPtr cond, parse_expression());
      s->exprs.push_back(std::move(cond));
      HZ_RETURN_IF_ERROR(expect_block_end());
      HZ_ASSIGN_OR_RETURN(Body b, parse_body({"elif", "else", "endif"}, &hit));
      s->bodies.push_back(std::move(b));
      if (hit != "elif") break;
    }
    if (hit == "else") {
      HZ_RETURN_IF_ERROR(expect_block_end());
      HZ_ASSIGN_OR_RETURN(Body b, parse_body({"endif"}, &hit));
      s->bodies.push_back(std::move(b));
    } else {
      s->bodies.emplace_back();
    }
    HZ_RETURN_IF_ERROR(expect_block_end());
  } else if (kw == "for") {
    s->kind = Stmt::Kind::kFor;
    HZ_RETURN_IF_ERROR(parse_for(*s));
  } else if (kw == "set") {
    HZ_RETURN_IF_ERROR(parse_set(*s));
  } else if (kw == "do") {
    s->kind = Stmt::Kind::kSet;  // no targets: evaluate and discard
    HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple_or_expression());
    s->exprs.push_back(std::move(e));
    HZ_RETURN_IF_ERROR(expect_block_end());
  } else if (kw == "macro") {
    s->kind = Stmt::Kind::kMacro;
    HZ_ASSIGN_OR_RETURN(s->text, expect_name());
    HZ_RETURN_IF_ERROR(parse_params(*s));
    HZ_RETURN_IF_ERROR(expect_block_end());
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    HZ_ASSIGN_OR_RETURN(Body b, parse_body({"endmacro"}, &hit));
    loop_depth_ = saved_loops;
    s->bodies.push_back(std::move(b));
    if (peek().kind == TokenKind::kName) next();  // {% endmacro name %}
    HZ_RETURN_IF_ERROR(expect_block_end());
  } else if (kw == "call") {
    s->kind = Stmt::Kind::kCallBlock;
    Stmt params;
    if (is_op("(")) HZ_RETURN_IF_ERROR(parse_params(params));
    HZ_ASSIGN_OR_RETURN(ExprPtr call, parse_expression());
    if (call->kind != Expr::Kind::kCall) return error_at(call->offset, "{% call %} needs a macro call");
    // exprs: the call, then the caller parameters' defaults.
    s->exprs.push_back(std::move(call));
    s->targets = std::move(params.targets);
    for (auto& d : params.exprs) s->exprs.push_back(std::move(d));
    HZ_RETURN_IF_ERROR(expect_block_end());
    HZ_ASSIGN_OR_RETURN(Body b, parse_body({"endcall"}, &hit));
    s->bodies.push_back(std::move(b));
    HZ_RETURN_IF_ERROR(expect_block_end());
  } else if (kw == "filter") {
    s->kind = Stmt::Kind::kFilterBlock;
    do {
      HZ_ASSIGN_OR_RETURN(ExprPtr f, parse_filter(nullptr));
      s->exprs.push_back(std::move(f));
    } while (is_op("|") && (next(), true));
    HZ_RETURN_IF_ERROR(expect_block_end());
    HZ_ASSIGN_OR_RETURN(Body b, parse_body({"endfilter"}, &hit));
    s->bodies.push_back(std::move(b));
    HZ_RETURN_IF_ERROR(expect_block_end());
  } else if (kw == "break" || kw == "continue") {
    if (loop_depth_ == 0) return error_at(offset, "'" + kw + "' outside of a loop");
    s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    HZ_RETURN_IF_ERROR(expect_block_end());
  } else if (kw == "generation") {
    // transformers' {% generation %} marks assistant text for masks; it renders its body as is.
    HZ_RETURN_IF_ERROR(expect_block_end());
    HZ_ASSIGN_OR_RETURN(Body b, parse_body({"endgeneration"}, &hit));
    HZ_RETURN_IF_ERROR(expect_block_end());
    s->kind = Stmt::Kind::kIf;
    auto always = node(Expr::Kind::kLiteral, offset);
    always->literal = Value::boolean(true);
    s->exprs.push_back(std::move(always));
    s->bodies.push_back(std::move(b));
    s->bodies.emplace_back();
  } else if (kw == "include" || kw == "import" || kw == "from" || kw == "extends" || kw == "block") {
    return error_at(offset, "'" + kw + "' is not allowed in chat templates (no access to other templates or files)");
  } else {
    return error_at(offset, "unknown or misplaced tag '" + kw + "'");
  }
  return s;
}

Status Parser::parse_for(Stmt& s) {
  do {
    HZ_ASSIGN_OR_RETURN(std::string t, expect_name());
    s.targets.push_back(std::move(t));
  } while (is_op(",") && (next(), true));
  if (!is_name("in")) return unexpected("'in'");
  next();
  // The iterable is parsed without conditional expressions: `for x in xs if cond` filters.
  HZ_ASSIGN_OR_RETURN(ExprPtr iter, parse_expression(false));
  s.exprs.push_back(std::move(iter));
  if (is_name("if")) {
    next();
    HZ_ASSIGN_OR_RETURN(ExprPtr cond, parse_expression());
    s.exprs.push_back(std::move(cond));
  }
  if (is_name("recursive")) return error_at(peek().offset, "recursive loops are not supported");
  HZ_RETURN_IF_ERROR(expect_block_end());
  std::string hit;
  ++loop_depth_;
  HZ_ASSIGN_OR_RETURN(Body body, parse_body({"else", "endfor"}, &hit));
  --loop_depth_;
  s.bodies.push_back(std::move(body));
  if (hit == "else") {
    HZ_RETURN_IF_ERROR(expect_block_end());
    HZ_ASSIGN_OR_RETURN(Body b, parse_body({"endfor"}, &hit));
    s.bodies.push_back(std::move(b));
  } else {
    s.bodies.emplace_back();
  }
  return expect_block_end();
}

Status Parser::parse_set(Stmt& s) {
  s.kind = Stmt::Kind::kSet;
  HZ_ASSIGN_OR_RETURN(std::string first, expect_name());
  s.targets.push_back(std::move(first));
  if (is_op(".")) {
    next();
    HZ_ASSIGN_OR_RETURN(s.attr, expect_name());
  } else {
    while (is_op(",")) {
      next();
      HZ_ASSIGN_OR_RETURN(std::string t, expect_name());
      s.targets.push_back(std::move(t));
    }
  }
  if (is_op("=")) {
    next();
    HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple_or_expression());
    s.exprs.push_back(std::move(e));
    return expect_block_end();
  }
  if (s.targets.size() != 1 || !s.attr.empty()) return unexpected("'='");
  s.kind = Stmt::Kind::kSetBlock;
  HZ_RETURN_IF_ERROR(expect_block_end());
  std::string hit;
  HZ_ASSIGN_OR_RETURN(Body b, parse_body({"endset"}, &hit));
  s.bodies.push_back(std::move(b));
  return expect_block_end();
}

Status Parser::parse_params(Stmt& s) {
  HZ_RETURN_IF_ERROR(expect_op("("));
  while (!is_op(")")) {
    HZ_ASSIGN_OR_RETURN(std::string name, expect_name());
    s.targets.push_back(std::move(name));
    if (is_op("=")) {
      next();
      HZ_ASSIGN_OR_RETURN(ExprPtr d, parse_expression());
      s.exprs.push_back(std::move(d));
    } else {
      s.exprs.push_back(nullptr);
    }
    if (!is_op(",")) break;
    next();
  }
  return expect_op(")");
}

Result<ExprPtr> Parser::parse_tuple_or_expression() {
  HZ_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
  if (!is_op(",")) return first;
  auto t = node(Expr::Kind::kTuple, first->offset);
  t->kids.push_back(std::move(first));
  while (is_op(",")) {
    next();
    if (peek().kind == TokenKind::kVarEnd || peek().kind == TokenKind::kBlockEnd) break;
    HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
    t->kids.push_back(std::move(e));
  }
  HZ_RETURN_IF_ERROR(seal(*t));
  return t;
}

Result<ExprPtr> Parser::parse_expression(bool with_cond) {
  HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_or());
  while (with_cond && is_name("if")) {
    auto c = node(Expr::Kind::kCond, next().offset);
    HZ_ASSIGN_OR_RETURN(ExprPtr cond, parse_or());
    ExprPtr other;
    if (is_name("else")) {
      next();
      Nest nest(this);
      HZ_RETURN_IF_ERROR(nest.check());
      HZ_ASSIGN_OR_RETURN(other, parse_expression());
    }
    c->kids.push_back(std::move(e));
    c->kids.push_back(std::move(cond));
    c->kids.push_back(std::move(other));
    HZ_RETURN_IF_ERROR(seal(*c));
    e = std::move(c);
  }
  return e;
}

Result<ExprPtr> Parser::parse_or() {
  HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_and());
  while (is_name("or")) {
    auto o = node(Expr::Kind::kOr, next().offset);
    HZ_ASSIGN_OR_RETURN(ExprPtr r, parse_and());
    o->kids.push_back(std::move(e));
    o->kids.push_back(std::move(r));
    HZ_RETURN_IF_ERROR(seal(*o));
    e = std::move(o);
  }
  return e;
}

Result<ExprPtr> Parser::parse_and() {
  HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_not());
  while (is_name("and")) {
    auto a = node(Expr::Kind::kAnd, next().offset);
    HZ_ASSIGN_OR_RETURN(ExprPtr r, parse_not());
    a->kids.push_back(std::move(e));
    a->kids.push_back(std::move(r));
    HZ_RETURN_IF_ERROR(seal(*a));
    e = std::move(a);
  }
  return e;
}

Result<ExprPtr> Parser::parse_not() {
  if (!is_name("not")) return parse_compare();
  Nest nest(this);
  HZ_RETURN_IF_ERROR(nest.check());
  auto n = node(Expr::Kind::kUnary, next().offset);
  n->name = "not";
  HZ_ASSIGN_OR_RETURN(ExprPtr x, parse_not());
  n->kids.push_back(std::move(x));
  HZ_RETURN_IF_ERROR(seal(*n));
  return n;
}

Result<ExprPtr> Parser::parse_compare() {
  HZ_ASSIGN_OR_RETURN(ExprPtr first, parse_binary_level(0));
  ExprPtr cmp;
  for (;;) {
    std::string op;
    const Token& t = peek();
    if (t.kind == TokenKind::kOp &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
      op = t.text;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && is_name("in", 1)) {
      op = "not in";
      next();
      next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = node(Expr::Kind::kCompare, first->offset);
      cmp->kids.push_back(std::move(first));
    }
    HZ_ASSIGN_OR_RETURN(ExprPtr r, parse_binary_level(0));
    cmp->ops.push_back(op);
    cmp->kids.push_back(std::move(r));
  }
  if (!cmp) return first;
  HZ_RETURN_IF_ERROR(seal(*cmp));
  return cmp;
}

// Levels: 0: + -   1: ~   2: * / // %   3: **
Result<ExprPtr> Parser::parse_binary_level(int level) {
  static const std::vector<std::vector<std::string_view>> kOps = {
      {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  auto operand = [&]() -> Result<ExprPtr> {
    return level == 3 ? parse_unary(true) : parse_binary_level(level + 1);
  };
  HZ_ASSIGN_OR_RETURN(ExprPtr e, operand());
  for (;;) {
    const Token& t = peek();
    if (t.kind != TokenKind::kOp) break;
    const auto& ops = kOps[level];
    if (std::find(ops.begin(), ops.end(), t.text) == ops.end()) break;
    auto b = node(Expr::Kind::kBinary, t.offset);
    b->name = next().text;
    HZ_ASSIGN_OR_RETURN(ExprPtr r, operand());
    b->kids.push_back(std::move(e));
    b->kids.push_back(std::move(r));
    HZ_RETURN_IF_ERROR(seal(*b));
    e = std::move(b);
  }
  return e;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    Nest nest(this);
    HZ_RETURN_IF_ERROR(nest.check());
    e = node(Expr::Kind::kUnary, peek().offset);
    e->name = next().text;
    HZ_ASSIGN_OR_RETURN(ExprPtr x, parse_unary(false));
    e->kids.push_back(std::move(x));
    HZ_RETURN_IF_ERROR(seal(*e));
  } else {
    HZ_ASSIGN_OR_RETURN(e, parse_primary());
  }
  HZ_ASSIGN_OR_RETURN(e, parse_postfix(std::move(e)));
  if (with_filter) return parse_filter_expr(std::move(e));
  return e;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token& t = peek();
  size_t offset = t.offset;
  switch (t.kind) {
    case TokenKind::kName: {
      std::string name = next().text;
      if (name == "true" || name == "True" || name == "false" || name == "False") {
        auto e = node(Expr::Kind::kLiteral, offset);
        e->literal = Value::boolean(name[0] == 't' || name[0] == 'T');
        return e;
      }
      if (name == "none" || name == "None") {
        auto e = node(Expr::Kind::kLiteral, offset);
        e->literal = Value::none();
        return e;
      }
      auto e = node(Expr::Kind::kName, offset);
      e->name = std::move(name);
      return e;
    }
    case TokenKind::kString: {
      std::string s;
      while (peek().kind == TokenKind::kString) s += next().text;  // adjacent literals join
      auto e = node(Expr::Kind::kLiteral, offset);
      e->literal = Value::string(std::move(s));
      return e;
    }
    case TokenKind::kInt: {
      auto e = node(Expr::Kind::kLiteral, offset);
      e->literal = Value::integer(std::strtoll(next().text.c_str(), nullptr, 10));
      return e;
    }
    case TokenKind::kFloat: {
      auto e = node(Expr::Kind::kLiteral, offset);
      e->literal = Value::floating(std::strtod(next().text.c_str(), nullptr));
      return e;
    }
    case TokenKind::kOp: break;
    default: return unexpected("an expression");
  }
  Nest nest(this);
  HZ_RETURN_IF_ERROR(nest.check());
  if (is_op("(")) {
    next();
    if (is_op(")")) {
      next();
      auto e = node(Expr::Kind::kTuple, offset);
      return e;
    }
    HZ_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
    if (is_op(")")) {
      next();
      return first;
    }
    auto tuple = node(Expr::Kind::kTuple, offset);
    tuple->kids.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (is_op(")")) break;
      HZ_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
      tuple->kids.push_back(std::move(e));
    }
    HZ_RETURN_IF_ERROR(expect_op(")"));
    HZ_RETURN_IF_ERROR(seal(*tuple));
    return tuple;
  }
  if (is_op("[") || is_op("{")) {
    bool is_dict = is_op("{");
    next();
    auto e = node(is_dict ? Expr::Kind::kDict : Expr::Kind::kList, offset);
    std::string_view close = is_dict ? "}" : "]";
    while (!is_op(close)) {
      HZ_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      e->kids.push_back(std::move(item));
      if (is_dict) {
        HZ_RETURN_IF_ERROR(expect_op(":"));
        HZ_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        e->kids.push_back(std::move(v));
      }
      if (!is_op(",")) break;
      next();
    }
    HZ_RETURN_IF_ERROR(expect_op(close));
    HZ_RETURN_IF_ERROR(seal(*e));
    return e;
  }
  return unexpected("an expression");
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".")) {
      size_t offset = next().offset;
      if (peek().kind == TokenKind::kInt) {  // foo.0 is foo[0]
        auto item = node(Expr::Kind::kItem, offset);
        auto idx = node(Expr::Kind::kLiteral, offset);
        idx->literal = Value::integer(std::strtoll(next().text.c_str(), nullptr, 10));
        item->kids.push_back(std::move(e));
        item->kids.push_back(std::move(idx));
        e = std::move(item);
      } else {
        auto attr = node(Expr::Kind::kAttr, offset);
        HZ_ASSIGN_OR_RETURN(attr->name, expect_name());
        attr->kids.push_back(std::move(e));
        e = std::move(attr);
      }
    } else if (is_op("[")) {
      Nest nest(this);
      HZ_RETURN_IF_ERROR(nest.check());
      size_t offset = next().offset;
      ExprPtr parts[3];
      int colons = 0;
      for (;;) {
        if (is_op(":")) {
          next();
          if (++colons > 2) return unexpected("']'");
          continue;
        }
        if (is_op("]")) break;
        if (parts[colons]) return unexpected("':' or ']'");
        HZ_ASSIGN_OR_RETURN(parts[colons], parse_expression());
      }
      next();
      if (colons == 0 && !parts[0]) return error_at(offset, "empty subscript");
      auto sub = node(colons == 0 ? Expr::Kind::kItem : Expr::Kind::kSlice, offset);
      sub->kids.push_back(std::move(e));
      sub->kids.push_back(std::move(parts[0]));
      if (colons > 0) {
        sub->kids.push_back(std::move(parts[1]));
        sub->kids.push_back(std::move(parts[2]));
      }
      e = std::move(sub);
    } else if (is_op("(")) {
      auto call = node(Expr::Kind::kCall, peek().offset);
      call->kids.push_back(std::move(e));
      HZ_RETURN_IF_ERROR(parse_call_args(*call));
      e = std::move(call);
    } else {
      break;
    }
    HZ_RETURN_IF_ERROR(seal(*e));
  }
  return e;
}

Status Parser::parse_call_args(Expr& call) {
  Nest nest(this);
  HZ_RETURN_IF_ERROR(nest.check());
  HZ_RETURN_IF_ERROR(expect_op("("));
  while (!is_op(")")) {
    if (is_op("*") || is_op("**")) return error_at(peek().offset, "argument unpacking (* and **) is not supported");
    if (peek().kind == TokenKind::kName && is_op("=", 1)) {
      call.kw_names.push_back(next().text);
      next();
    } else if (!call.kw_names.empty()) {
      return error_at(peek().offset, "positional argument after a keyword argument");
    }
    HZ_ASSIGN_OR_RETURN(ExprPtr arg, parse_expression());
    call.kids.push_back(std::move(arg));
    if (!is_op(",")) break;
    next();
  }
  return expect_op(")");
}

Result<ExprPtr> Parser::parse_filter(ExprPtr operand) {
  auto f = node(Expr::Kind::kFilter, peek().offset);
  HZ_ASSIGN_OR_RETURN(f->name, expect_name());
  while (is_op(".") && peek(1).kind == TokenKind::kName) {  // dotted filter names
    next();
    f->name += "." + next().text;
  }
  f->kids.push_back(std::move(operand));
  if (is_op("(")) HZ_RETURN_IF_ERROR(parse_call_args(*f));
  HZ_RETURN_IF_ERROR(seal(*f));
  return f;
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (is_op("|")) {
      next();
      HZ_ASSIGN_OR_RETURN(e, parse_filter(std::move(e)));
    } else if (is_name("is")) {
      auto t = node(Expr::Kind::kTest, next().offset);
      if (is_name("not")) {
        next();
        t->negated = true;
      }
      HZ_ASSIGN_OR_RETURN(t->name, expect_name());
      t->kids.push_back(std::move(e));
      const Token& a = peek();
      if (is_op("(")) {
        HZ_RETURN_IF_ERROR(parse_call_args(*t));
      } else if ((a.kind == TokenKind::kName || a.kind == TokenKind::kString || a.kind == TokenKind::kInt ||
                  a.kind == TokenKind::kFloat || is_op("[") || is_op("{")) &&
                 !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("is")) {
        // One argument without parentheses: `x is divisibleby 3`, `x is equalto y`.
        HZ_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
        HZ_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
        t->kids.push_back(std::move(arg));
      }
      HZ_RETURN_IF_ERROR(seal(*t));
      e = std::move(t);
    } else if (is_op("(")) {
      auto call = node(Expr::Kind::kCall, peek().offset);
      call->kids.push_back(std::move(e));
      HZ_RETURN_IF_ERROR(parse_call_args(*call));
      HZ_RETURN_IF_ERROR(seal(*call));
      e = std::move(call);
    } else {
      return e;
    }
  }
}

}  // namespace

Result<Body> parse_template(std::string_view source, int max_depth) {
  HZ_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  return Parser(source, std::move(tokens), max_depth).parse_all();
}

}  // namespace hz::jinja
