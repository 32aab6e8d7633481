// simplify: constant folding, common-subexpression elimination, algebraic
// identities that are exact, and dead-code elimination.
//
// One walk rewrites each function, block by block (a let chain), with a
// substitution of replaced variables and a scoped table of available op
// calls (a call computed in an enclosing block is available in the `if` /
// `match` branches and closures inside it, never the other way round):
//   - an op call whose arguments are all constants is computed by the op's
//     reference kernel and becomes a constant (results up to kMaxFolded
//     elements; a call that raises is left to raise at run time);
//   - an op call equal to one already available (same op, attributes and
//     arguments) is replaced by that one's variable;
//   - exact identities, where the result has x's type: x * 1, x / 1, x - 0,
//     neg(neg(x)), cast(x) to x's own dtype, a reshape to x's own static
//     shape (x + 0 is not one: -0 + 0 is +0);
// then a backward sweep per block drops lets whose value is unused and pure
// (op calls, tuples, projections, constants, variables, closures), which may
// drop a run-time error of code whose result nothing reads.
#include <fmt/format.h>

#include <unordered_map>

#include "ir/op.hpp"
#include "nimble/ir/module.hpp"
#include "ops/ops.hpp"
#include "passes/pass_util.hpp"
#include "passes/passes.hpp"
#include "support/stack_guard.hpp"

namespace nimble::passes {

namespace {

using ir::Expr;

constexpr std::int64_t kMaxFolded = 1 << 16;  // elements

const ir::OpDef* op_of(const Expr& e) {
  const auto* call = e.as<ir::CallNode>();
  const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
  return op ? op->def : nullptr;
}

// Whether `e` is a constant whose every element is `value`.
bool is_constant_value(const Expr& e, double value) {
  const auto* c = e.as<ir::ConstantNode>();
  if (!c || c->value.numel() == 0 || c->value.numel() > 64) return false;
  for (std::int64_t i = 0; i < c->value.numel(); ++i)
    if (c->value.element_as_double(i) != value) return false;
  return true;
}

bool is_pure(const Expr& value) {
  switch (value.kind()) {
    case ir::ExprKind::var:
    case ir::ExprKind::constant:
    case ir::ExprKind::tuple:
    case ir::ExprKind::tuple_get:
    case ir::ExprKind::function: return true;
    case ir::ExprKind::call: return op_of(value) != nullptr;
    default: return false;
  }
}

// The CSE key of an op call: op, attributes and arguments by identity (a
// small constant by its text).
std::string call_key(const ir::OpDef& op, const ir::CallNode& call) {
  std::string key(op.name);
  for (const auto& [name, value] : call.attrs.items()) key += fmt::format(" {}={}", name, ir::to_string(value));
  for (const Expr& a : call.args) {
    const auto* c = a.as<ir::ConstantNode>();
    if (c && c->value.numel() <= 16)
      key += fmt::format(" {}", ir::print(a));
    else
      key += fmt::format(" @{}", static_cast<const void*>(a.get()));
  }
  return key;
}

class Simplifier {
 public:
  Expr rewrite(const Expr& e) {
    check_stack("simplify");
    switch (e.kind()) {
      case ir::ExprKind::var: {
        const auto it = subst_.find(e.as<ir::VarNode>());
        return it == subst_.end() ? e : it->second;
      }
      case ir::ExprKind::let: return rewrite_block(e);
      case ir::ExprKind::call: return rewrite_call(e);
      default:
        return rebuild(
            e, [this](const Expr& x) { return rewrite(x); }, [this](const Expr& x) { return scoped(x); });
    }
  }

 private:
  // A nested block: what it makes available ends with it.
  Expr scoped(const Expr& e) {
    const auto saved = available_;
    Expr out = rewrite(e);
    available_ = saved;
    return out;
  }

  Expr rewrite_block(const Expr& e) {
    struct Binding {
      Expr var;
      Expr value;
      ir::SourceLoc loc;
    };
    std::vector<Binding> kept;
    Expr cur = e;
    while (const auto* let = cur.as<ir::LetNode>()) {
      Expr value = rewrite(let->value);
      const auto* var = let->var.as<ir::VarNode>();
      // A let of a variable or a constant is substituted into its uses;
      // an available op call is reused.
      if (value.as<ir::VarNode>() || value.as<ir::ConstantNode>()) {
        subst_[var] = value;
      } else if (const ir::OpDef* op = op_of(value)) {
        const std::string key = call_key(*op, *value.as<ir::CallNode>());
        if (const auto it = available_.find(key); it != available_.end()) {
          subst_[var] = it->second;
        } else {
          available_.emplace(key, let->var);
          defs_.emplace(var, value);
          kept.push_back({let->var, std::move(value), let->loc});
        }
      } else {
        kept.push_back({let->var, std::move(value), let->loc});
      }
      cur = let->body;
    }
    Expr body = rewrite(cur);

    // Dead code, from the end: a dropped let may leave its inputs unused.
    UseCounter counter;
    counter.visit(body);
    for (const Binding& b : kept) counter.visit(b.value);
    std::unordered_map<const ir::VarNode*, int>& uses = counter.uses;
    for (std::size_t i = kept.size(); i-- > 0;) {
      const Binding& b = kept[i];
      const auto* var = b.var.as<ir::VarNode>();
      if (uses[var] == 0 && is_pure(b.value)) {
        UseCounter inner;
        inner.visit(b.value);
        for (const auto& [v, n] : inner.uses) uses[v] -= n;
        continue;
      }
      body = ir::let(b.var, b.value, std::move(body), b.loc);
    }
    return body;
  }

  Expr rewrite_call(const Expr& e) {
    const auto* n = e.as<ir::CallNode>();
    std::vector<Expr> args;
    for (const Expr& a : n->args) args.push_back(rewrite(a));
    Expr callee = rewrite(n->callee);
    const auto* op = callee.as<ir::OpNode>();
    if (!op) return ir::call(std::move(callee), std::move(args), n->attrs, n->loc);
    if (Expr folded = fold(*op->def, args, n->attrs, n->checked_type); folded.defined()) return folded;
    if (Expr same = identity(*op->def, args, n->checked_type); same.defined()) return same;
    return ir::call(std::move(callee), std::move(args), n->attrs, n->loc);
  }

  // The constant value of op(args) if every argument is a constant.
  static Expr fold(const ir::OpDef& op, const std::vector<Expr>& args, const ir::Attrs& attrs,
                   const ir::Type& type) {
    if (!op.reference) return {};
    const auto* result = type.as<ir::TensorTypeNode>();
    if (!result) return {};
    // Sized before it runs: a creation op's constant shape can ask for any
    // size, and the compiler must not allocate it.
    std::int64_t numel = 1;
    for (const ir::Dim& d : result->shape) {
      if (!d.is_fixed() || d.value() > kMaxFolded) return {};
      numel *= d.value();
      if (numel > kMaxFolded) return {};
    }
    std::vector<Value> values;
    for (const Expr& a : args) {
      const auto* c = a.as<ir::ConstantNode>();
      if (!c) return {};
      values.emplace_back(c->value);
    }
    try {
      const Value v = op.reference(values, attrs);
      if (!v.is_tensor() || v.tensor().numel() > kMaxFolded) return {};
      return ir::constant(v.tensor());
    } catch (const Error&) {
      return {};  // it raises when it runs
    }
  }

  // x for op(args) that is exactly x, of x's own type.
  Expr identity(const ir::OpDef& op, const std::vector<Expr>& args, const ir::Type& type) const {
    if (args.empty() || !type.defined()) return {};
    const Expr& x = args[0];
    Expr same;
    if ((&op == &ops::mul() || &op == &ops::div()) && is_constant_value(args[1], 1.0)) same = x;
    if (&op == &ops::mul() && is_constant_value(x, 1.0)) same = args[1];
    if (&op == &ops::sub() && is_constant_value(args[1], 0.0)) same = x;
    if (&op == &ops::neg()) {
      const auto it = x.as<ir::VarNode>() ? defs_.find(x.as<ir::VarNode>()) : defs_.end();
      if (it != defs_.end() && op_of(it->second) == &ops::neg()) same = it->second.as<ir::CallNode>()->args[0];
    }
    if (&op == &ops::cast() || &op == &ops::reshape()) same = x;  // when the type says so, below
    if (!same.defined() || !(same.type() == type)) return {};
    // Equal types are equal shapes unless a dim is Any (two Anys may differ:
    // a reshape of [?, ?] to [?, ?]).
    for (const ir::Dim& d : type.as<ir::TensorTypeNode>()->shape)
      if (!d.is_fixed() && !d.is_symbol()) return {};
    return same;
  }

  std::unordered_map<const ir::VarNode*, Expr> subst_;
  std::unordered_map<const ir::VarNode*, Expr> defs_;  // op calls kept, by their variable
  std::unordered_map<std::string, Expr> available_;
};

}  // namespace

ir::Module simplify(const ir::Module& module) {
  return map_functions(module, [](const Expr& fn) { return Simplifier().rewrite(fn); });
}

}  // namespace nimble::passes
