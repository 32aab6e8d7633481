#include "codegen/expr_cost.hpp"

namespace nimble::codegen {

int op_cost(const te::Expr& e, OpCostOf of) {
  if (const auto* u = e.as<te::UnaryNode>()) {
    switch (u->op) {
      case te::UnaryOp::exp:
      case te::UnaryOp::log:
      case te::UnaryOp::tanh:
      case te::UnaryOp::sigmoid:
      case te::UnaryOp::erf: return 30;
      case te::UnaryOp::rsqrt: return of == OpCostOf::emitted ? 2 : 1;  // 1 / sqrt(x)
      default: return 1;
    }
  }
  if (const auto* b = e.as<te::BinaryNode>()) {
    const bool floating = is_floating(b->a.dtype());
    if (b->op == te::BinaryOp::pow) return of == OpCostOf::epilogue || floating ? 60 : 1;
    if (b->op == te::BinaryOp::rem) return of == OpCostOf::emitted && floating ? 60 : 1;
  }
  return 1;
}

}  // namespace nimble::codegen
