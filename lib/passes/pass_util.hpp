// Helpers the passes share: use counts, and rebuilding an expression from
// rewritten children.
#pragma once

#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/visitor.hpp"
#include "nimble/ir/module.hpp"

namespace nimble::passes {

/// Uses of each variable in what it visits (binding occurrences excluded).
class UseCounter final : public ir::ExprVisitor {
 public:
  std::unordered_map<const ir::VarNode*, int> uses;

 protected:
  void visit_var(const ir::Expr&, const ir::VarNode& v) override { ++uses[&v]; }
  void visit_let_binding(const ir::Expr&, const ir::LetNode& n) override { visit(n.value); }
  void visit_function(const ir::Expr&, const ir::FunctionNode& n) override { visit(n.body); }
  void visit_pattern(const ir::Pattern&) override {}
};

/// `e` rebuilt with `child` applied to its operands and `body` to the
/// blocks it opens (if branches, match clauses, a function's body); a leaf
/// comes back as it is. Not for lets: a pass walks its chains itself.
template <class Child, class Body>
ir::Expr rebuild(const ir::Expr& e, Child&& child, Body&& body) {
  switch (e.kind()) {
    case ir::ExprKind::call: {
      const auto* n = e.as<ir::CallNode>();
      std::vector<ir::Expr> args;
      for (const ir::Expr& a : n->args) args.push_back(child(a));
      ir::Expr callee = child(n->callee);
      return ir::call(std::move(callee), std::move(args), n->attrs, n->loc);
    }
    case ir::ExprKind::if_: {
      const auto* n = e.as<ir::IfNode>();
      ir::Expr cond = child(n->cond);
      ir::Expr then_branch = body(n->then_branch);
      return ir::if_then_else(std::move(cond), std::move(then_branch), body(n->else_branch), n->loc);
    }
    case ir::ExprKind::tuple: {
      std::vector<ir::Expr> fields;
      for (const ir::Expr& f : e.as<ir::TupleNode>()->fields) fields.push_back(child(f));
      return ir::tuple(std::move(fields), e->loc);
    }
    case ir::ExprKind::tuple_get: {
      const auto* n = e.as<ir::TupleGetNode>();
      return ir::tuple_get(child(n->tuple), n->index, n->loc);
    }
    case ir::ExprKind::function: {
      const auto* n = e.as<ir::FunctionNode>();
      return ir::function(n->params, n->ret_type, body(n->body), n->loc, n->primitive);
    }
    case ir::ExprKind::match: {
      const auto* n = e.as<ir::MatchNode>();
      ir::Expr value = child(n->value);
      std::vector<ir::Clause> clauses;
      for (const ir::Clause& c : n->clauses) clauses.push_back({c.pattern, body(c.body)});
      return ir::match(std::move(value), std::move(clauses), n->loc);
    }
    default: return e;
  }
}

/// A module with each global function replaced by `rewrite(function)` (or
/// `rewrite(name, function)`), its ADTs and entries kept, types inferred again.
template <class Rewrite>
ir::Module map_functions(const ir::Module& module, Rewrite&& rewrite) {
  ir::Module out;
  for (const ir::AdtDef& adt : module.adts()) out.add_adt(adt);
  for (const auto& [name, fn] : module.functions()) {
    if constexpr (std::is_invocable_v<Rewrite&, const std::string&, const ir::Expr&>)
      out.add_function(name, rewrite(name, fn));
    else
      out.add_function(name, rewrite(fn));
  }
  for (const std::string& entry : module.entries()) out.add_entry(entry);
  ir::infer_types(out);
  return out;
}

}  // namespace nimble::passes
