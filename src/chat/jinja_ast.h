// Syntax tree of the chat-template language: expressions and statements, owned by a ChatTemplate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace hz::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kAttr,     // kids[0].name
    kItem,     // kids[0][kids[1]]
    kSlice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids = omitted)
    kCall,     // kids[0](kids[1..]); the last kw_names.size() arguments are keywords
    kFilter,   // kids[0] | name(kids[1..]); kids[0] is null inside a filter block
    kTest,     // kids[0] is [not] name(kids[1..])
    kUnary,    // name in {"-", "+", "not"}
    kBinary,   // kids[0] name kids[1]; name is the operator, including "in", "not in", "~"
    kCompare,  // kids[0] ops[0] kids[1] ops[1] kids[2] ... (chained like Python)
    kAnd,
    kOr,
    kCond,  // kids[0] if kids[1] else kids[2] (kids[2] may be null: undefined)
    kList,
    kTuple,
    kDict,  // kids alternate key, value
  };
  Kind kind;
  size_t offset = 0;  // source offset, for error positions
  int depth = 1;      // height of this subtree, bounded by the parser
  std::string name;
  Value literal;
  std::vector<ExprPtr> kids;
  std::vector<std::string> kw_names;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ exprs[0] }}
    kIf,           // exprs[i] -> bodies[i]; bodies has one more entry (else) than exprs
    kFor,          // for targets in exprs[0] [if exprs[1]]: bodies[0], else bodies[1]
    kSet,          // targets = exprs[0]; attr set: targets[0].attr = exprs[0]
    kSetBlock,     // {% set targets[0] %}bodies[0]{% endset %}
    kMacro,        // macro name(targets with defaults exprs[i] (may be null)): bodies[0]
    kCallBlock,    // {% call(targets) exprs[0] %}bodies[0]{% endcall %}
    kFilterBlock,  // {% filter exprs... %}bodies[0]{% endfilter %}; exprs are kFilter with a null operand
    kBreak,
    kContinue,
  };
  Kind kind;
  size_t offset = 0;
  std::string text;  // kText: the text; kMacro: the macro name
  std::string attr;  // kSet on a namespace attribute
  std::vector<std::string> targets;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

}  // namespace hz::jinja
