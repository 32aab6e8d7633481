#include "nimble/ir/expr.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "ir/op.hpp"
#include "support/check.hpp"

namespace nimble::ir {

std::string to_string(const SourceLoc& loc) {
  if (!loc.known()) return "";
  const char* base = std::strrchr(loc.file, '/');
  return fmt::format("{}:{}", base ? base + 1 : loc.file, loc.line);
}

Attrs& Attrs::set(std::string name, AttrValue value) {
  for (auto& [key, existing] : items_) {
    if (key == name) {
      existing = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
  return *this;
}

const AttrValue* Attrs::find(std::string_view name) const noexcept {
  for (const auto& [key, value] : items_)
    if (key == name) return &value;
  return nullptr;
}

std::string to_string(const AttrValue& value) {
  struct Printer {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      // Shortest text that reads back as the same double, always with a '.'
      // or an exponent so that it reads back as a real, not an integer.
      std::string s = fmt::format("{}", d);
      if (std::isfinite(d) && s.find_first_of(".e") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(const std::string& s) const { return fmt::format("\"{}\"", s); }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      return fmt::format("[{}]", fmt::join(v, ", "));
    }
    std::string operator()(DType t) const { return std::string(nimble::to_string(t)); }
  };
  return std::visit(Printer{}, value);
}

int AdtDefNode::find_constructor(std::string_view ctor_name) const noexcept {
  for (std::size_t i = 0; i < constructors.size(); ++i)
    if (constructors[i].name == ctor_name) return static_cast<int>(i);
  return -1;
}

namespace {
void require(const Expr& e, const char* what, const char* role) {
  if (!e.defined())
    throw_error(ErrorKind::invalid_argument, "{}: the {} is an undefined expression", what, role);
}
void require_var(const Expr& e, const char* what) {
  if (!e.as<VarNode>())
    throw_error(ErrorKind::invalid_argument, "{}: expected a variable", what);
}
}  // namespace

Expr var(std::string name, Type annotation, SourceLoc loc) {
  if (name.empty()) throw_error(ErrorKind::invalid_argument, "var: a variable needs a name");
  return Expr(make_ref<VarNode>(std::move(name), std::move(annotation), loc));
}

Expr constant(Tensor value, SourceLoc loc) {
  if (!value.defined())
    throw_error(ErrorKind::invalid_argument, "constant: expected a defined tensor");
  if (!value.device().is_cpu())
    throw_error(ErrorKind::invalid_argument, "constant: expected a host tensor, got one on {}",
                to_string(value.device()));
  return Expr(make_ref<ConstantNode>(std::move(value), loc));
}

Expr global_var(std::string name, SourceLoc loc) {
  if (name.empty()) throw_error(ErrorKind::invalid_argument, "global: a global needs a name");
  return Expr(make_ref<GlobalVarNode>(std::move(name), loc));
}

Expr op_ref(const OpDef& op, SourceLoc loc) { return Expr(make_ref<OpNode>(&op, loc)); }

Expr constructor(AdtDef adt, std::string_view name, SourceLoc loc) {
  if (!adt) throw_error(ErrorKind::invalid_argument, "constructor: no ADT given");
  const int tag = adt->find_constructor(name);
  if (tag < 0)
    throw_error(ErrorKind::invalid_argument, "constructor: type {} has no constructor '{}'",
                adt->name, name);
  return Expr(make_ref<ConstructorNode>(std::move(adt), static_cast<std::uint32_t>(tag), loc));
}

Expr call(Expr callee, std::vector<Expr> args, Attrs attrs, SourceLoc loc) {
  require(callee, "call", "callee");
  for (const Expr& a : args) require(a, "call", "argument");
  return Expr(make_ref<CallNode>(std::move(callee), std::move(args), std::move(attrs), loc));
}

Expr let(Expr v, Expr value, Expr body, SourceLoc loc) {
  require_var(v, "let");
  require(value, "let", "value");
  require(body, "let", "body");
  return Expr(make_ref<LetNode>(std::move(v), std::move(value), std::move(body), loc));
}

Expr if_then_else(Expr cond, Expr then_branch, Expr else_branch, SourceLoc loc) {
  require(cond, "if", "condition");
  require(then_branch, "if", "then branch");
  require(else_branch, "if", "else branch");
  return Expr(
      make_ref<IfNode>(std::move(cond), std::move(then_branch), std::move(else_branch), loc));
}

Expr tuple(std::vector<Expr> fields, SourceLoc loc) {
  for (const Expr& f : fields) require(f, "tuple", "field");
  return Expr(make_ref<TupleNode>(std::move(fields), loc));
}

Expr tuple_get(Expr t, std::uint32_t index, SourceLoc loc) {
  require(t, "tuple_get", "tuple");
  return Expr(make_ref<TupleGetNode>(std::move(t), index, loc));
}

Expr function(std::vector<Expr> params, Type ret_type, Expr body, SourceLoc loc, bool primitive) {
  for (const Expr& p : params) {
    require_var(p, "function parameter");
    if (!p.as<VarNode>()->type_annotation.defined())
      throw_error(ErrorKind::invalid_argument, "function: parameter %{} needs a type",
                  p.as<VarNode>()->name);
  }
  require(body, "function", "body");
  return Expr(
      make_ref<FunctionNode>(std::move(params), std::move(ret_type), std::move(body), loc, primitive));
}

Expr match(Expr value, std::vector<Clause> clauses, SourceLoc loc) {
  require(value, "match", "value");
  if (clauses.empty()) throw_error(ErrorKind::invalid_argument, "match: expected at least one clause");
  for (const Clause& c : clauses) {
    if (!c.pattern.defined())
      throw_error(ErrorKind::invalid_argument, "match: a clause has no pattern");
    require(c.body, "match", "clause body");
  }
  return Expr(make_ref<MatchNode>(std::move(value), std::move(clauses), loc));
}

Pattern pattern_wildcard() { return Pattern(make_ref<PatternWildcardNode>()); }
Pattern pattern_var(Expr v) {
  require_var(v, "pattern");
  return Pattern(make_ref<PatternVarNode>(std::move(v)));
}
Pattern pattern_constructor(Expr ctor, std::vector<Pattern> fields) {
  if (!ctor.as<ConstructorNode>())
    throw_error(ErrorKind::invalid_argument, "pattern: expected a constructor");
  return Pattern(make_ref<PatternConstructorNode>(std::move(ctor), std::move(fields)));
}
Pattern pattern_tuple(std::vector<Pattern> fields) {
  return Pattern(make_ref<PatternTupleNode>(std::move(fields)));
}

}  // namespace nimble::ir
