// fuse_ops: groups op calls into primitive functions, each of which a code
// generator compiles as one kernel (one launch, intermediates in registers or
// in the kernel's own scratch).
//
// Groups form inside one let chain (a straight-line block): never across
// `if`, `match` or function boundaries, so every control-flow path runs whole
// groups. A producer joins a group when all its users are in the group (its
// value then dies inside the kernel) and the patterns allow it (OpPattern in
// ir/op.hpp) — Relay's FuseOps, where a producer fuses into its immediate
// post-dominator with everything between them:
//   - elementwise, broadcast and injective ops chain freely (a tuple
//     argument's fields count as arguments: concatenate's parts join it);
//   - a reduction takes injective producers (they inline into its source) and
//     injective consumers (its epilogue);
//   - dense / matmul take injective consumers only (bias, activation,
//     residual, a head transpose): their inputs stay packed buffers;
//   - a reduction also takes a producer group that has a matmul or another
//     reduction: that stage stays materialized in the kernel's scratch (the
//     residual layer_norm after a dense, a softmax after its batch_matmul);
//   - an injective consumer joins at most one group with such an anchor.
// So every group has exactly one output, its last op, whose let keeps its
// variable; the other members disappear from the block. Ops that the VM runs itself (integer scalars, shapes) or whose
// output shape depends on data are never fused, and a group of one op, or of
// views only (reshapes stay views), is left as it is.
//
// A group becomes `let %root = (primitive fn (%p0, ...) { lets })(args)`: its
// parameters are the values it reads from outside (variables and constants
// other than floating-point scalars, which stay inside for kernels to fold).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/op.hpp"
#include "nimble/ir/module.hpp"
#include "ops/ops.hpp"
#include "ops/shape_function.hpp"
#include "passes/pass_util.hpp"
#include "passes/passes.hpp"
#include "support/check.hpp"
#include "support/stack_guard.hpp"

namespace nimble::passes {

namespace {

using ir::Expr;

bool is_view(const ir::OpDef& op) {
  return &op == &ops::reshape() || &op == &ops::expand_dims() || &op == &ops::squeeze();
}

bool is_anchor(ir::OpPattern p) {
  return p == ir::OpPattern::reduction || p == ir::OpPattern::out_elemwise_fusable;
}

// A block's tuples read by exactly one op call of the block (`let %t =
// (%a, %b); concatenate(%t)`): their fields are that call's operands.
using OperandTuples = std::unordered_map<const ir::VarNode*, const ir::TupleNode*>;

// The values an op call reads: its arguments, with the fields of a tuple
// (written in place, or one of `tuples`) in their stead.
template <class Fn>
void for_each_operand(const ir::CallNode& call, const OperandTuples& tuples, Fn&& fn) {
  for (const Expr& a : call.args) {
    const auto* tuple = a.as<ir::TupleNode>();
    if (const auto* v = a.as<ir::VarNode>()) {
      if (const auto it = tuples.find(v); it != tuples.end()) tuple = it->second;
    }
    if (tuple) {
      for (const Expr& f : tuple->fields) fn(f);
    } else {
      fn(a);
    }
  }
}

// An op call a kernel can share with others: a fusable op on tensors (or a
// tuple of them: concatenate's parts) giving one tensor whose shape follows
// from the input shapes, and not scalar integer work (loop counters, shape
// arithmetic), which the VM does itself.
const ir::OpDef* fusable_op(const Expr& value, const OperandTuples& tuples) {
  const auto* call = value.as<ir::CallNode>();
  const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
  if (!op || op->def->pattern == ir::OpPattern::opaque) return nullptr;
  if (ops::has_data_dependent_shape(*op->def)) return nullptr;
  const auto* result = call->checked_type.as<ir::TensorTypeNode>();
  if (!result) return nullptr;
  if (result->rank() == 0 && !is_floating(result->dtype)) return nullptr;
  bool tensors = true;
  for_each_operand(*call, tuples, [&](const Expr& a) {
    tensors = tensors && a.type().as<ir::TensorTypeNode>() && (a.as<ir::VarNode>() || a.as<ir::ConstantNode>());
  });
  return tensors ? op->def : nullptr;
}

// A floating-point scalar constant stays inside its group, where the kernel
// folds it; integer scalars are often index data (an offset, a gathered
// index) that kernels read from a buffer.
bool is_scalar_constant(const Expr& e) {
  const auto* c = e.as<ir::ConstantNode>();
  return c != nullptr && c->value.rank() == 0 && is_floating(c->value.dtype());
}

struct Group {
  std::vector<std::size_t> members;  // binding indices, in block order
  bool has_anchor = false;
  bool views_only = true;
};

class Fuser {
 public:
  explicit Fuser(const std::unordered_map<const ir::VarNode*, int>& uses) : uses_(uses) {}

  Expr rewrite(const Expr& e) {
    check_stack("fuse_ops");
    if (e.as<ir::LetNode>()) return rewrite_block(e);
    if (const auto* fn = e.as<ir::FunctionNode>(); fn && fn->primitive) return e;
    const auto self = [this](const Expr& x) { return rewrite(x); };
    return rebuild(e, self, self);
  }

 private:
  struct Binding {
    Expr var;
    Expr value;
    ir::SourceLoc loc;
  };

  Expr rewrite_block(const Expr& e) {
    std::vector<Binding> block;
    Expr cur = e;
    while (const auto* let = cur.as<ir::LetNode>()) {
      block.push_back({let->var, let->value, let->loc});
      cur = let->body;
    }
    // Tuples that one later op call of the block reads, and that call.
    OperandTuples tuples;
    std::unordered_map<const ir::VarNode*, std::size_t> tuple_reader;
    for (std::size_t i = 0; i < block.size(); ++i) {
      const auto* v = block[i].var.as<ir::VarNode>();
      if (const auto* t = block[i].value.as<ir::TupleNode>(); t && v) {
        if (const auto u = uses_.find(v); u != uses_.end() && u->second == 1) tuples.emplace(v, t);
      } else if (const auto* call = block[i].value.as<ir::CallNode>()) {
        for (const Expr& a : call->args)
          if (const auto* av = a.as<ir::VarNode>(); av && tuples.contains(av)) tuple_reader.emplace(av, i);
      }
    }
    for (auto it = tuples.begin(); it != tuples.end();)
      it = tuple_reader.contains(it->first) ? std::next(it) : tuples.erase(it);

    std::vector<Group> groups;
    const std::vector<int> group_of = form_groups(block, tuples, groups);

    // Rebuild the chain from its end: a root becomes the call of its group's
    // primitive function, other members vanish (with the tuples only they
    // read), the rest is rewritten.
    Expr body = rewrite(cur);
    for (std::size_t i = block.size(); i-- > 0;) {
      const int g = group_of[i];
      const auto* var = block[i].var.as<ir::VarNode>();
      if (const auto reader = tuple_reader.find(var); reader != tuple_reader.end() && group_of[reader->second] >= 0)
        continue;  // written in place in the reader's kernel
      Expr value;
      if (g < 0) {
        value = rewrite(block[i].value);
      } else if (groups[static_cast<std::size_t>(g)].members.back() == i) {
        value = fused_call(block, tuples, groups[static_cast<std::size_t>(g)]);
      } else {
        continue;  // inside its group's kernel
      }
      body = ir::let(block[i].var, std::move(value), std::move(body), block[i].loc);
    }
    return body;
  }

  // Assigns each binding a group (or -1) and keeps only groups worth a kernel.
  std::vector<int> form_groups(const std::vector<Binding>& block, const OperandTuples& tuples,
                               std::vector<Group>& groups) const {
    // Per variable of the block: the bindings whose calls read it, and how
    // many of its uses those are (the others are outside any call here).
    std::unordered_map<const ir::VarNode*, std::size_t> index_of;
    std::unordered_map<const ir::VarNode*, std::vector<std::size_t>> users;
    std::unordered_map<const ir::VarNode*, int> call_uses;
    for (std::size_t i = 0; i < block.size(); ++i) {
      index_of.emplace(block[i].var.as<ir::VarNode>(), i);
      if (const auto* call = block[i].value.as<ir::CallNode>())
        for_each_operand(*call, tuples, [&](const Expr& a) {
          if (const auto* v = a.as<ir::VarNode>()) {
            users[v].push_back(i);
            ++call_uses[v];
          }
        });
    }
    std::vector<int> group_of(block.size(), -1);
    for (std::size_t i = 0; i < block.size(); ++i) {
      const ir::OpDef* op = fusable_op(block[i].value, tuples);
      if (!op) continue;
      Group merged{.members = {i}, .has_anchor = is_anchor(op->pattern), .views_only = is_view(*op)};
      std::unordered_set<std::size_t> member(merged.members.begin(), merged.members.end());
      // Grow the group from its members' producers: a producer group joins
      // when every user of its output is already a member (so the group
      // stays convex and has one output). Each member's arguments are
      // looked at once it is in, so a value read by two members (x and
      // sigmoid(x) in x * sigmoid(x)) joins when the second one does.
      for (std::size_t k = 0; k < merged.members.size(); ++k) {
        const auto& call = *block[merged.members[k]].value.as<ir::CallNode>();
        const ir::OpPattern pattern = call.callee.as<ir::OpNode>()->def->pattern;
        // A matmul reads packed inputs: it joins no producer. A reduction
        // takes any producer group (one with an anchor is materialized in
        // the kernel's scratch: a residual layer_norm after its dense, a
        // softmax after its scaled batch_matmul). An injective op takes a
        // group with an anchor only into a group without one.
        if (pattern == ir::OpPattern::out_elemwise_fusable) continue;
        for_each_operand(call, tuples, [&](const Expr& a) {
          const auto* v = a.as<ir::VarNode>();
          const auto at = v ? index_of.find(v) : index_of.end();
          if (at == index_of.end() || at->second >= i) return;
          const int g = group_of[at->second];
          if (g < 0 || member.count(at->second) != 0) return;
          if (const auto u = uses_.find(v); u == uses_.end() || u->second != call_uses[v]) return;
          bool inside = true;
          for (std::size_t user : users[v]) inside = inside && member.count(user) != 0;
          if (!inside) return;
          Group& producer = groups[static_cast<std::size_t>(g)];
          if (pattern != ir::OpPattern::reduction && producer.has_anchor && merged.has_anchor) return;
          merged.has_anchor = merged.has_anchor || producer.has_anchor;
          merged.views_only = merged.views_only && producer.views_only;
          merged.members.insert(merged.members.end(), producer.members.begin(), producer.members.end());
          member.insert(producer.members.begin(), producer.members.end());
          producer.members.clear();
        });
      }
      std::sort(merged.members.begin(), merged.members.end());
      const int id = static_cast<int>(groups.size());
      for (std::size_t m : merged.members) group_of[m] = id;
      groups.push_back(std::move(merged));
    }
    // A group of one op, or of views only, stays as it is.
    for (std::size_t i = 0; i < block.size(); ++i) {
      const int g = group_of[i];
      if (g < 0) continue;
      const Group& group = groups[static_cast<std::size_t>(g)];
      if (group.members.size() < 2 || group.views_only) group_of[i] = -1;
    }
    return group_of;
  }

  // The call of a new primitive function computing `group`.
  static Expr fused_call(const std::vector<Binding>& block, const OperandTuples& tuples, const Group& group) {
    std::unordered_map<const ir::ExprNode*, Expr> inner;  // outer value -> inner var
    std::vector<Expr> params;
    std::vector<Expr> args;
    auto inner_value = [&](const Expr& a) -> Expr {
      if (is_scalar_constant(a)) return a;
      if (const auto it = inner.find(a.get()); it != inner.end()) return it->second;
      Expr p = ir::var(fmt::format("p{}", params.size()), a.type());
      params.push_back(p);
      args.push_back(a);
      inner.emplace(a.get(), p);
      return p;
    };
    std::vector<std::pair<Expr, Expr>> lets;  // inner var, op call
    for (std::size_t m : group.members) {
      const auto& call = *block[m].value.as<ir::CallNode>();
      std::vector<Expr> call_args;
      for (const Expr& a : call.args) {
        const auto* tuple = a.as<ir::TupleNode>();
        if (const auto* v = a.as<ir::VarNode>()) {
          if (const auto it = tuples.find(v); it != tuples.end()) tuple = it->second;
        }
        if (tuple) {
          std::vector<Expr> fields;
          for (const Expr& f : tuple->fields) fields.push_back(inner_value(f));
          call_args.push_back(ir::tuple(std::move(fields), tuple->loc));
        } else {
          call_args.push_back(inner_value(a));
        }
      }
      Expr v = ir::var(block[m].var.as<ir::VarNode>()->name);
      lets.emplace_back(v, ir::call(call.callee, std::move(call_args), call.attrs, call.loc));
      inner.emplace(block[m].var.get(), v);
    }
    Expr body = lets.back().first;
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) body = ir::let(it->first, it->second, body);
    const Expr& root = block[group.members.back()].value;
    Expr fn = ir::function(std::move(params), {}, std::move(body), root->loc, /*primitive=*/true);
    return ir::call(std::move(fn), std::move(args), {}, root->loc);
  }

  const std::unordered_map<const ir::VarNode*, int>& uses_;
};

}  // namespace

ir::Module fuse_ops(const ir::Module& module) {
  return map_functions(module, [](const Expr& fn) {
    UseCounter counter;
    counter.visit(fn);
    return Fuser(counter.uses).rewrite(fn);
  });
}

}  // namespace nimble::passes
