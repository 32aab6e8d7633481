// Closure conversion's analysis: the variables a closure uses but does not
// bind; and the variables a function reads at all (match binds no others).
// Variables are unique nodes, so "bound anywhere inside" is exact.
#include <unordered_set>

#include "ir/visitor.hpp"
#include "compiler/bytecode/compiler.hpp"

namespace nimble::vm {

namespace {

class FreeVarCollector final : public ir::ExprVisitor {
 public:
  std::vector<const ir::VarNode*> used;
  std::unordered_set<const ir::VarNode*> bound;

 protected:
  void visit_var(const ir::Expr&, const ir::VarNode& v) override {
    if (seen_.insert(&v).second) used.push_back(&v);
  }
  void visit_let_binding(const ir::Expr&, const ir::LetNode& n) override {
    bound.insert(n.var.as<ir::VarNode>());
    visit(n.value);
  }
  void visit_function(const ir::Expr&, const ir::FunctionNode& n) override {
    for (const ir::Expr& p : n.params) bound.insert(p.as<ir::VarNode>());
    visit(n.body);
  }
  void visit_pattern(const ir::Pattern& p) override {
    if (const auto* v = p.as<ir::PatternVarNode>()) {
      bound.insert(v->var.as<ir::VarNode>());
      return;
    }
    ExprVisitor::visit_pattern(p);
  }

 private:
  std::unordered_set<const ir::VarNode*> seen_;
};

}  // namespace

std::vector<const ir::VarNode*> free_vars(const ir::FunctionNode& fn, const ir::VarNode* self) {
  FreeVarCollector c;
  for (const ir::Expr& p : fn.params) c.bound.insert(p.as<ir::VarNode>());
  c.visit(fn.body);
  std::vector<const ir::VarNode*> out;
  for (const ir::VarNode* v : c.used)
    if (v != self && !c.bound.contains(v)) out.push_back(v);
  return out;
}

std::unordered_set<const ir::VarNode*> read_vars(const ir::Expr& body) {
  FreeVarCollector c;
  c.visit(body);
  return {c.used.begin(), c.used.end()};
}

}  // namespace nimble::vm
