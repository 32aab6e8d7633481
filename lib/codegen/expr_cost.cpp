#include "codegen/expr_cost.hpp"

namespace nimble::codegen {

int op_cost(const te::Expr& e, OpCostOf of) {
  // A unary primitive's cost is stated once, in ops/unary_ops.def.
  if (const auto* u = e.as<te::UnaryNode>()) return te::cost_of(u->op);
  if (const auto* b = e.as<te::BinaryNode>()) {
    const bool floating = is_floating(b->a.dtype());
    if (b->op == te::BinaryOp::pow) return of == OpCostOf::epilogue || floating ? 60 : 1;
    if (b->op == te::BinaryOp::rem) return of == OpCostOf::emitted && floating ? 60 : 1;
  }
  return 1;
}

}  // namespace nimble::codegen
