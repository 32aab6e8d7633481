// pretranspose_weights: a dense whose weight is a constant becomes a matmul
// with that weight transposed once, here, at compile time:
//
//   let v = dense(x, W, bias)   ->   let t = matmul(x, Wᵀ); let v = add(t, bias)
//
// for W a 2-d f32 constant and x a 2-d f32 tensor whose rows are not
// statically one. dense reads W [n, k] along k (the code generator's dot
// products: sums folded across vector lanes at every tile); matmul reads
// Wᵀ [k, n] along n (outer products: one vector of the weight per step of
// k, no horizontal sums, panels packed by plain copies), which runs the
// products of BERT's shapes about a third faster here. The executable keeps
// Wᵀ only (W is no longer referenced). A single row (an LSTM step) stays a
// dense: its matrix-vector product splits the weight's rows across threads.
// fuse_ops then groups the add with the matmul as its epilogue.
#include <cstdint>
#include <span>
#include <tuple>
#include <vector>

#include "ir/op.hpp"
#include "nimble/ir/module.hpp"
#include "ops/ops.hpp"
#include "passes/pass_util.hpp"
#include "passes/passes.hpp"
#include "support/stack_guard.hpp"

namespace nimble::passes {

namespace {

using ir::Expr;

// The dense call `value` whose weight to transpose, or null.
const ir::CallNode* transposable_dense(const Expr& value) {
  const auto* call = value.as<ir::CallNode>();
  const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
  if (op == nullptr || op->def != &ops::dense() || call->args.size() != 3) return nullptr;
  const auto* w = call->args[1].as<ir::ConstantNode>();
  if (w == nullptr || w->value.dtype() != DType::f32 || w->value.rank() != 2) return nullptr;
  const ir::Type& xt = call->args[0].type();
  const auto* x = xt.defined() ? xt.as<ir::TensorTypeNode>() : nullptr;
  if (x == nullptr || x->dtype != DType::f32 || x->rank() != 2) return nullptr;
  const ir::Dim& rows = x->shape[0];
  return rows.is_fixed() && rows.value() == 1 ? nullptr : call;
}

Expr rewrite(const Expr& e) {
  check_stack("pretranspose_weights");
  if (!e.as<ir::LetNode>())
    return rebuild(
        e, [](const Expr& x) { return rewrite(x); }, [](const Expr& x) { return rewrite(x); });
  // A let chain, iteratively (chains are as long as programs).
  std::vector<std::tuple<Expr, Expr, ir::SourceLoc>> chain;
  Expr cur = e;
  while (const auto* let = cur.as<ir::LetNode>()) {
    Expr value = rewrite(let->value);
    if (const ir::CallNode* dense = transposable_dense(value)) {
      const Tensor& w = dense->args[1].as<ir::ConstantNode>()->value;
      const Value weight[] = {w};
      const Tensor wt = ops::transpose().reference(std::span<const Value>(weight), {{"axes", std::vector<std::int64_t>{1, 0}}}).tensor();
      Expr product = ir::var(let->var.as<ir::VarNode>()->name + "_product", {}, let->loc);
      chain.emplace_back(product,
                         ir::call(ir::op_ref(ops::matmul(), dense->loc), {dense->args[0], ir::constant(wt, dense->loc)},
                                  {{"transpose_a", false}, {"transpose_b", false}}, dense->loc),
                         let->loc);
      value = ir::call(ir::op_ref(ops::add(), dense->loc), {product, dense->args[2]}, {}, dense->loc);
    }
    chain.emplace_back(let->var, std::move(value), let->loc);
    cur = let->body;
  }
  Expr body = rewrite(cur);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    body = ir::let(std::get<0>(*it), std::get<1>(*it), std::move(body), std::get<2>(*it));
  return body;
}

}  // namespace

ir::Module pretranspose_weights(const ir::Module& module) {
  return map_functions(module, [](const Expr& fn) { return rewrite(fn); });
}

}  // namespace nimble::passes
