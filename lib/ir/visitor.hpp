// ExprVisitor: walks an expression tree, by default visiting every
// sub-expression once per occurrence: visit_<kind> on the way down (pre-order),
// leave() on the way up (post-order). Subclasses override
// visit_<kind> and call the base to keep recursing. Let chains are walked
// iteratively, so a long sequence of lets (a long straight-line program)
// never overflows the C++ stack.
#pragma once

#include <vector>

#include "nimble/ir/expr.hpp"
#include "support/stack_guard.hpp"

namespace nimble::ir {

class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;

  void visit(const Expr& e) {
    check_stack("an IR walk");
    Expr cur = e;
    // Walk a let chain as a loop: let a = x; let b = y; ... body.
    std::vector<Expr> chain;
    while (const auto* let = cur.as<LetNode>()) {
      visit_let_binding(cur, *let);
      chain.push_back(cur);
      cur = let->body;
    }
    dispatch(cur);
    leave(cur);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) leave(*it);
  }

 protected:
  /// Called after a node and everything under it was visited (post-order).
  virtual void leave(const Expr&) {}

  virtual void visit_var(const Expr&, const VarNode&) {}
  virtual void visit_constant(const Expr&, const ConstantNode&) {}
  virtual void visit_global_var(const Expr&, const GlobalVarNode&) {}
  virtual void visit_op(const Expr&, const OpNode&) {}
  virtual void visit_constructor(const Expr&, const ConstructorNode&) {}
  virtual void visit_call(const Expr&, const CallNode& n) {
    visit(n.callee);
    for (const Expr& a : n.args) visit(a);
  }
  /// One binding of a let chain: the value (the body is walked by visit()).
  virtual void visit_let_binding(const Expr&, const LetNode& n) {
    visit(n.var);
    visit(n.value);
  }
  virtual void visit_if(const Expr&, const IfNode& n) {
    visit(n.cond);
    visit(n.then_branch);
    visit(n.else_branch);
  }
  virtual void visit_tuple(const Expr&, const TupleNode& n) {
    for (const Expr& f : n.fields) visit(f);
  }
  virtual void visit_tuple_get(const Expr&, const TupleGetNode& n) { visit(n.tuple); }
  virtual void visit_function(const Expr&, const FunctionNode& n) {
    for (const Expr& p : n.params) visit(p);
    visit(n.body);
  }
  virtual void visit_match(const Expr&, const MatchNode& n) {
    visit(n.value);
    for (const Clause& c : n.clauses) {
      visit_pattern(c.pattern);
      visit(c.body);
    }
  }
  virtual void visit_pattern(const Pattern& p) {
    check_stack("an IR walk (patterns)");
    if (const auto* v = p.as<PatternVarNode>()) visit(v->var);
    if (const auto* c = p.as<PatternConstructorNode>()) {
      visit(c->ctor);
      for (const Pattern& f : c->fields) visit_pattern(f);
    }
    if (const auto* t = p.as<PatternTupleNode>())
      for (const Pattern& f : t->fields) visit_pattern(f);
  }

 private:
  void dispatch(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::var: return visit_var(e, *e.as<VarNode>());
      case ExprKind::constant: return visit_constant(e, *e.as<ConstantNode>());
      case ExprKind::global_var: return visit_global_var(e, *e.as<GlobalVarNode>());
      case ExprKind::op: return visit_op(e, *e.as<OpNode>());
      case ExprKind::constructor: return visit_constructor(e, *e.as<ConstructorNode>());
      case ExprKind::call: return visit_call(e, *e.as<CallNode>());
      case ExprKind::let: return visit(e);  // unreachable: chains are unrolled above
      case ExprKind::if_: return visit_if(e, *e.as<IfNode>());
      case ExprKind::tuple: return visit_tuple(e, *e.as<TupleNode>());
      case ExprKind::tuple_get: return visit_tuple_get(e, *e.as<TupleGetNode>());
      case ExprKind::function: return visit_function(e, *e.as<FunctionNode>());
      case ExprKind::match: return visit_match(e, *e.as<MatchNode>());
    }
  }
};

}  // namespace nimble::ir
