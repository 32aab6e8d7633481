// split_to_slices: each part of a split that is read becomes a slice of the
// split's input, when the split axis has a static extent:
//
//   let t = split(x, sections=5, axis=0); let g = t.1
//     ->  let g = strided_slice(x, begin=[150], end=[300], axes=[0])
//
// A split gives a tuple, and fuse_ops groups only ops that give one tensor:
// the split ran as a kernel of its own, copying each part into an
// allocation of its own, and the VM built the tuple and took it apart (a
// Tree-LSTM node's five gates: a kernel, five allocations, a tuple and five
// field reads). A slice is injective: it fuses into the kernels that read
// the part, which then read it where it lies. The split goes when its tuple
// is read only through its parts (else it stays for the other readers).
// Only a split whose parts' extents along the axis are static (their bounds
// are constants) and whose input is a variable or a constant (each slice
// reads it).
#include <cstdint>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <variant>
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

// A split's input and each part's range along the axis.
struct Parts {
  Expr x;
  std::int64_t axis = 0;
  std::vector<std::int64_t> begin, end;
};

std::optional<Parts> static_parts(const Expr& value) {
  const auto* call = value.as<ir::CallNode>();
  const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
  if (op == nullptr || op->def != &ops::split() || call->args.size() != 1) return std::nullopt;
  const Expr& x = call->args[0];
  if (!x.as<ir::VarNode>() && !x.as<ir::ConstantNode>()) return std::nullopt;
  const auto* xt = x.type().defined() ? x.type().as<ir::TensorTypeNode>() : nullptr;
  const auto* parts = call->checked_type.defined() ? call->checked_type.as<ir::TupleTypeNode>() : nullptr;
  if (xt == nullptr || parts == nullptr || xt->rank() == 0) return std::nullopt;
  const auto rank = static_cast<std::int64_t>(xt->rank());
  std::int64_t axis = std::get<std::int64_t>(ir::attr_or_default(*op->def, call->attrs, "axis"));
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  Parts p{.x = x, .axis = axis};
  std::int64_t at = 0;
  for (const ir::Type& field : parts->fields) {
    const auto* t = field.as<ir::TensorTypeNode>();
    if (t == nullptr || t->rank() != xt->rank() || !t->shape[static_cast<std::size_t>(axis)].is_fixed())
      return std::nullopt;
    p.begin.push_back(at);
    at += t->shape[static_cast<std::size_t>(axis)].value();
    p.end.push_back(at);
  }
  return p;
}

class SplitToSlices {
 public:
  explicit SplitToSlices(const Expr& fn) { counter_.visit(fn); }

  Expr rewrite(const Expr& e) {
    check_stack("split_to_slices");
    if (const auto* get = e.as<ir::TupleGetNode>()) {
      const auto* v = get->tuple.as<ir::VarNode>();
      const auto it = v ? parts_.find(v) : parts_.end();
      if (it != parts_.end() && get->index < it->second.begin.size()) {
        ++rewritten_[v];
        const Parts& p = it->second;
        return ir::call(ir::op_ref(ops::strided_slice(), get->loc), {p.x},
                        {{"begin", std::vector<std::int64_t>{p.begin[get->index]}},
                         {"end", std::vector<std::int64_t>{p.end[get->index]}},
                         {"axes", std::vector<std::int64_t>{p.axis}}},
                        get->loc);
      }
    }
    if (!e.as<ir::LetNode>())
      return rebuild(
          e, [this](const Expr& x) { return rewrite(x); }, [this](const Expr& x) { return rewrite(x); });
    // A let chain, iteratively (chains are as long as programs).
    std::vector<std::tuple<Expr, Expr, ir::SourceLoc>> chain;
    Expr cur = e;
    while (const auto* let = cur.as<ir::LetNode>()) {
      // The types are the original's (a rebuilt call has none yet).
      if (std::optional<Parts> p = static_parts(let->value)) parts_.emplace(let->var.as<ir::VarNode>(), std::move(*p));
      Expr value = rewrite(let->value);
      chain.emplace_back(let->var, std::move(value), let->loc);
      cur = let->body;
    }
    Expr body = rewrite(cur);
    // The variables are in scope only after their lets: every part read is
    // rewritten by now.
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const auto* v = std::get<0>(*it).as<ir::VarNode>();
      if (parts_.contains(v) && rewritten_[v] == counter_.uses[v]) continue;
      body = ir::let(std::get<0>(*it), std::get<1>(*it), std::move(body), std::get<2>(*it));
    }
    return body;
  }

 private:
  UseCounter counter_;
  std::unordered_map<const ir::VarNode*, Parts> parts_;
  std::unordered_map<const ir::VarNode*, int> rewritten_;
};

}  // namespace

ir::Module split_to_slices(const ir::Module& module) {
  return map_functions(module, [](const Expr& fn) { return SplitToSlices(fn).rewrite(fn); });
}

}  // namespace nimble::passes
