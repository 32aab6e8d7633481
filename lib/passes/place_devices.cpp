// place_devices: every value gets a device, and a device_copy goes where a
// value crosses from one device to another (the pipeline's step 6, docs/ARCHITECTURE.md).
//
// The target is where kernels run. Compiling for the CPU, every value is on
// the CPU and the pass returns the module unchanged; for another target:
//   - kernels run on the target: an op call that is a kernel, or a call of
//     a primitive (fused) function, takes its tensor arguments there and
//     leaves its result there;
//   - the VM's own work stays on the CPU: scalar integer and bool ops (loop
//     counters, conditions: an op call whose arguments and result are rank-0
//     integer or bool tensors), shape_of (it reads a shape, which a tensor
//     carries wherever it lives; its argument stays where it is), and ops
//     whose result shape depends on their data (arange, nonzero: their shape
//     functions are data-dependent, and shape functions run on the CPU); an
//     `if` reads its condition on the CPU;
//   - constants live in the Executable, in host memory; one a kernel on
//     the target reads is copied there like any value (the VM copies a
//     constant once per VM, not per call: LoadConst with a device);
//   - where values meet without an op — parameters, results, tuple and ADT
//     fields, branch results — a value is where its type says: a rank-0
//     integer or bool on the CPU, any other tensor on the target; tuples,
//     ADTs and closures are VM objects (their fields follow the same rule);
//   - an entry function is called by the host with host tensors: its tensor
//     parameters are on the CPU and its tensor results (in a tuple too) go
//     back there — unless the results are asked on the target
//     (CompileOptions::result_device): then they are where their type says,
//     as a non-entry function's are (a list of them too). A parameter that holds tensors inside a tuple or an ADT
//     (a model's weights as a list) is copied to the target whole at the
//     entry, on each call (tensors the caller passes there already are not
//     copied; its integer and bool scalars stay on the CPU). Results on the host that would carry target tensors inside an ADT are
//     not supported yet (an ADT of integer scalars, such as a tree
//     of token indices, is fine: those live on the CPU anyway).
// A copy is inserted only where the device a value is on differs from the
// one its use needs; a variable copied once is reused by later uses in its
// block and the blocks inside it.
// Shape functions are not in the IR: the bytecode compiler runs them on the
// CPU from the shapes of the arguments.
#include <fmt/format.h>

#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

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

// Whether a value of type `t` can hold a tensor that is not a VM scalar
// (one that would live on the target), through tuples and ADT fields.
bool holds_target_tensors(const ir::Type& t, const ir::Module& module,
                          const std::map<std::string, ir::Type>& type_args, std::set<std::string>& seen) {
  if (t.as<ir::TensorTypeNode>()) return !is_vm_scalar(t);
  if (const auto* tuple = t.as<ir::TupleTypeNode>()) {
    for (const ir::Type& f : tuple->fields)
      if (holds_target_tensors(f, module, type_args, seen)) return true;
    return false;
  }
  if (const auto* v = t.as<ir::TypeVarNode>()) {
    const auto it = type_args.find(v->name);
    return it == type_args.end() || holds_target_tensors(it->second, module, {}, seen);
  }
  if (const auto* adt = t.as<ir::AdtTypeNode>()) {
    const ir::AdtDef def = module.find_adt(adt->name);
    if (!def) return true;
    std::map<std::string, ir::Type> inner;
    std::string key = adt->name;
    for (std::size_t i = 0; i < def->type_params.size() && i < adt->args.size(); ++i) {
      ir::Type arg = adt->args[i];
      if (const auto* v = arg.as<ir::TypeVarNode>(); v && type_args.count(v->name)) arg = type_args.at(v->name);
      key += ' ';
      key += ir::to_string(arg);
      inner.emplace(def->type_params[i], arg);
    }
    if (!seen.insert(key).second) return false;  // a recursive occurrence: its fields are being checked
    for (const ir::ConstructorDef& c : def->constructors)
      for (const ir::Type& f : c.fields)
        if (holds_target_tensors(f, module, inner, seen)) return true;
    return false;
  }
  return false;  // functions
}

std::string device_name(Device d) { return d.is_cpu() ? "cpu" : fmt::format("cuda{}", d.index); }

class Placer {
 public:
  Placer(const ir::Module& module, Device target, Device results)
      : module_(module), target_(target), results_(results) {}

  Expr rewrite_function(const std::string& name, const Expr& e) {
    const auto* fn = e.as<ir::FunctionNode>();
    const bool entry = module_.is_entry(name);
    std::vector<std::pair<Expr, Expr>> entry_copies;
    for (const Expr& p : fn->params) {
      const auto* v = p.as<ir::VarNode>();
      where_[v] = entry ? Device::cpu() : boundary(v->type_annotation);
      std::set<std::string> seen;
      if (entry && !v->type_annotation.as<ir::TensorTypeNode>() &&
          holds_target_tensors(v->type_annotation, module_, {}, seen)) {
        // Host tensors inside a tuple or an ADT (a model's weights as a
        // list): the whole value goes to the target at the entry, once per
        // call, and the body uses that copy.
        Expr copy = ir::var(fmt::format("{}_{}", v->name, device_name(target_)), {}, v->loc);
        ir::Attrs attrs{{"src", to_string(Device::cpu())}, {"dst", to_string(target_)}};
        entry_copies.emplace_back(copy, ir::call(ir::op_ref(ops::device_copy()), {p}, std::move(attrs), v->loc));
        where_[copy.as<ir::VarNode>()] = Device::cpu();  // a VM object; its tensors are on the target
        renamed_[v] = std::move(copy);
      }
    }
    Expr body = entry && results_.is_cpu() ? block_to_host(fn->body, name)
                                           : block(fn->body, boundary(result_type(*fn)));
    for (std::size_t i = entry_copies.size(); i-- > 0;)
      body = ir::let(entry_copies[i].first, entry_copies[i].second, std::move(body));
    return ir::function(fn->params, fn->ret_type, std::move(body), fn->loc, fn->primitive);
  }

 private:
  struct Placed {
    Expr expr;
    Device device;
  };

  // A function's result type: as declared, else as inferred (a function
  // defined without one returns its body's type).
  static ir::Type result_type(const ir::FunctionNode& fn) {
    return fn.ret_type.defined() ? fn.ret_type : fn.body.type();
  }

  // Where a value is when nothing but its type decides (see the top).
  [[nodiscard]] Device boundary(const ir::Type& t) const {
    return t.as<ir::TensorTypeNode>() && !is_vm_scalar(t) ? target_ : Device::cpu();
  }

  // `e` (placed, of the type `type` its original has, on `have`) as needed on `want`.
  Expr to(const Expr& e, const ir::Type& type, Device have, Device want) {
    if (have == want || !type.as<ir::TensorTypeNode>()) return e;
    const auto* v = e.as<ir::VarNode>();
    const auto key = std::make_pair(v, device_name(want));
    if (v)
      if (const auto it = copies_.find(key); it != copies_.end()) return it->second;
    ir::Attrs attrs{{"src", to_string(have)}, {"dst", to_string(want)}};
    Expr copy = ir::call(ir::op_ref(ops::device_copy()), {e}, std::move(attrs), e->loc);
    if (!v) return copy;
    Expr var = ir::var(fmt::format("{}_{}", v->name, device_name(want)), {}, e->loc);
    pending_.emplace_back(var, std::move(copy));
    where_[var.as<ir::VarNode>()] = want;
    copies_.emplace(key, var);
    return var;
  }

  Placed place(const Expr& e) {
    check_stack("place_devices");
    switch (e.kind()) {
      case ir::ExprKind::var: {
        if (const auto r = renamed_.find(e.as<ir::VarNode>()); r != renamed_.end()) return {r->second, Device::cpu()};
        const auto it = where_.find(e.as<ir::VarNode>());
        return {e, it == where_.end() ? Device::cpu() : it->second};
      }
      case ir::ExprKind::call: return place_call(e);
      case ir::ExprKind::if_: {
        const auto* n = e.as<ir::IfNode>();
        const Placed cond = place(n->cond);
        const Device want = boundary(e.type());
        Expr c = to(cond.expr, n->cond.type(), cond.device, Device::cpu());
        Expr then_branch = block(n->then_branch, want);
        return {ir::if_then_else(std::move(c), std::move(then_branch), block(n->else_branch, want), n->loc), want};
      }
      case ir::ExprKind::match: {
        const auto* n = e.as<ir::MatchNode>();
        Expr value = place(n->value).expr;
        const Device want = boundary(e.type());
        std::vector<ir::Clause> clauses;
        for (const ir::Clause& c : n->clauses) {
          bind_pattern(c.pattern);
          clauses.push_back({c.pattern, block(c.body, want)});
        }
        return {ir::match(std::move(value), std::move(clauses), n->loc), want};
      }
      case ir::ExprKind::tuple: {
        std::vector<Expr> fields;
        for (const Expr& f : e.as<ir::TupleNode>()->fields) fields.push_back(at(f, boundary(f.type())));
        return {ir::tuple(std::move(fields), e->loc), Device::cpu()};
      }
      case ir::ExprKind::tuple_get: {
        const auto* n = e.as<ir::TupleGetNode>();
        return {ir::tuple_get(place(n->tuple).expr, n->index, n->loc), boundary(e.type())};
      }
      case ir::ExprKind::function: {
        const auto* fn = e.as<ir::FunctionNode>();
        if (fn->primitive) return {e, Device::cpu()};
        for (const Expr& p : fn->params) where_[p.as<ir::VarNode>()] = boundary(p.as<ir::VarNode>()->type_annotation);
        Expr body = block(fn->body, boundary(result_type(*fn)));
        return {ir::function(fn->params, fn->ret_type, std::move(body), fn->loc), Device::cpu()};
      }
      case ir::ExprKind::let: return {block(e, boundary(e.type())), boundary(e.type())};
      default: return {e, Device::cpu()};  // constants (host memory), globals, ops, constructors
    }
  }

  // `e` placed and copied to `want`.
  Expr at(const Expr& e, Device want) {
    const Placed p = place(e);
    return to(p.expr, e.type(), p.device, want);
  }

  Placed place_call(const Expr& e) {
    const auto* n = e.as<ir::CallNode>();
    std::vector<Expr> args;
    const auto args_on = [&](auto&& device_of_arg) {
      for (std::size_t i = 0; i < n->args.size(); ++i) args.push_back(at(n->args[i], device_of_arg(i)));
    };
    if (const auto* op = n->callee.as<ir::OpNode>()) {
      const Device result = device_of_op_call(*n, target_);
      if (op->def == &ops::shape_of() || op->def == &ops::device_copy()) {
        args.push_back(place(n->args[0]).expr);  // read where it is
      } else {
        args_on([&](std::size_t) { return result; });
      }
      return {ir::call(n->callee, std::move(args), n->attrs, n->loc), result};
    }
    if (const auto* fn = n->callee.as<ir::FunctionNode>(); fn && fn->primitive) {
      args_on([&](std::size_t) { return target_; });
      return {ir::call(n->callee, std::move(args), n->attrs, n->loc), target_};
    }
    if (const auto* g = n->callee.as<ir::GlobalVarNode>(); g && module_.is_entry(g->name)) {
      // The host's convention: tensors on the CPU, and back where the
      // results are asked.
      args_on([&](std::size_t i) { return n->args[i].type().as<ir::TensorTypeNode>() ? Device::cpu() : boundary(n->args[i].type()); });
      Expr call = ir::call(n->callee, std::move(args), n->attrs, n->loc);
      if (!results_.is_cpu()) return {std::move(call), boundary(e.type())};
      std::set<std::string> seen;
      if (e.type().as<ir::TensorTypeNode>() || !holds_target_tensors(e.type(), module_, {}, seen))
        return {std::move(call), Device::cpu()};
      // Host tensors in a tuple: the whole value to the target, where its
      // readers take its fields by type (as an entry's parameter).
      ir::Attrs attrs{{"src", to_string(Device::cpu())}, {"dst", to_string(target_)}};
      return {ir::call(ir::op_ref(ops::device_copy()), {std::move(call)}, std::move(attrs), n->loc), Device::cpu()};
    }
    // Any other function, a closure or a constructor: values meet by type.
    Expr callee = place(n->callee).expr;
    args_on([&](std::size_t i) { return boundary(n->args[i].type()); });
    return {ir::call(std::move(callee), std::move(args), n->attrs, n->loc), boundary(e.type())};
  }

  void bind_pattern(const ir::Pattern& p) {
    check_stack("place_devices");
    if (const auto* v = p.as<ir::PatternVarNode>()) {
      const auto* var = v->var.as<ir::VarNode>();
      where_[var] = boundary(v->var.type());
    } else if (const auto* c = p.as<ir::PatternConstructorNode>()) {
      for (const ir::Pattern& f : c->fields) bind_pattern(f);
    } else if (const auto* t = p.as<ir::PatternTupleNode>()) {
      for (const ir::Pattern& f : t->fields) bind_pattern(f);
    }
  }

  // A block (a let chain) whose value ends on `want`.
  Expr block(const Expr& e, Device want) {
    return block_with(e, [&](const Expr& x) { return at(x, want); });
  }

  // An entry function's body: its tensor result (or a tuple's tensor
  // fields) goes back to the host.
  Expr block_to_host(const Expr& e, const std::string& name) {
    return block_with(e, [&](const Expr& x) { return host(x, name); });
  }

  // `e` with its tensors on the host: a tuple built here field by field.
  Expr host(const Expr& e, const std::string& name) {
    if (const auto* t = e.as<ir::TupleNode>()) {
      std::vector<Expr> fields;
      for (const Expr& f : t->fields) fields.push_back(host(f, name));
      return ir::tuple(std::move(fields), e->loc);
    }
    const Placed p = place(e);
    return to_host(p.expr, e.type(), p.device, name);
  }

  Expr to_host(const Expr& e, const ir::Type& t, Device have, const std::string& name) {
    if (t.as<ir::TensorTypeNode>()) return to(e, t, have, Device::cpu());
    if (t.as<ir::FuncTypeNode>()) return e;
    const auto* tuple = t.as<ir::TupleTypeNode>();
    std::set<std::string> seen;
    if (!tuple && !holds_target_tensors(t, module_, {}, seen)) return e;
    if (!tuple)
      throw_error(ErrorKind::not_supported,
                  "not supported: place_devices for {}: entry @{} returns {}, which would hold tensors "
                  "on {}",
                  to_string(target_), name, ir::to_string(t), to_string(target_));
    Expr whole = e;
    if (!e.as<ir::VarNode>()) {
      whole = ir::var("result", {}, e->loc);
      pending_.emplace_back(whole, e);
    }
    std::vector<Expr> fields;
    for (std::uint32_t i = 0; i < tuple->fields.size(); ++i) {
      Expr field = ir::tuple_get(whole, i, e->loc);
      if (!tuple->fields[i].as<ir::TensorTypeNode>()) {
        fields.push_back(to_host(field, tuple->fields[i], Device::cpu(), name));
        continue;
      }
      Expr v = ir::var(fmt::format("result{}", i), {}, e->loc);
      pending_.emplace_back(v, std::move(field));
      fields.push_back(to(v, tuple->fields[i], boundary(tuple->fields[i]), Device::cpu()));
    }
    return ir::tuple(std::move(fields), e->loc);
  }

  // Walks the let chain of `e`, placing each value (with the copies its
  // uses need just before it), then `tail` on the chain's final expression.
  // Copies made in the block are available to it and the blocks inside it.
  template <class Tail>
  Expr block_with(const Expr& e, Tail&& tail) {
    const auto saved_copies = copies_;
    auto saved_pending = std::exchange(pending_, {});
    std::vector<std::pair<Expr, Expr>> lets;  // in order
    const auto flush = [&] {
      for (auto& b : pending_) lets.push_back(std::move(b));
      pending_.clear();
    };
    Expr cur = e;
    while (const auto* let = cur.as<ir::LetNode>()) {
      const Placed p = place(let->value);
      flush();
      where_[let->var.as<ir::VarNode>()] = p.device;
      lets.emplace_back(let->var, p.expr);
      cur = let->body;
    }
    Expr body = tail(cur);
    flush();
    for (std::size_t i = lets.size(); i-- > 0;) body = ir::let(lets[i].first, lets[i].second, std::move(body));
    pending_ = std::move(saved_pending);
    copies_ = saved_copies;
    return body;
  }

  std::unordered_map<const ir::VarNode*, Device> where_;
  std::unordered_map<const ir::VarNode*, Expr> renamed_;  // entry parameters used through their copy
  std::map<std::pair<const ir::VarNode*, std::string>, Expr> copies_;
  std::vector<std::pair<Expr, Expr>> pending_;  // lets to emit before the current binding
  const ir::Module& module_;
  Device target_;
  Device results_;  // where entries' results go: the CPU or the target
};

}  // namespace

bool is_vm_scalar(const ir::Type& t) {
  const auto* tensor = t.as<ir::TensorTypeNode>();
  return tensor && tensor->rank() == 0 &&
         (tensor->dtype == DType::i64 || tensor->dtype == DType::i32 || tensor->dtype == DType::boolean);
}

Device device_of_op_call(const ir::CallNode& call, Device target) {
  const ir::OpDef* op = call.callee.as<ir::OpNode>() ? call.callee.as<ir::OpNode>()->def : nullptr;
  if (!op) return target;  // a primitive (fused) function: a kernel
  if (op == &ops::shape_of()) return Device::cpu();
  if (op == &ops::device_copy()) return parse_device(std::get<std::string>(ir::attr_or_default(*op, call.attrs, "dst")));
  if (ops::has_data_dependent_shape(*op)) return Device::cpu();
  bool scalars = is_vm_scalar(call.checked_type);
  for (const Expr& a : call.args) scalars = scalars && is_vm_scalar(a.type());
  return scalars ? Device::cpu() : target;
}

ir::Module place_devices(const ir::Module& module, Device target, Device results) {
  if (results != Device::cpu() && results != target)
    throw_error(ErrorKind::invalid_argument,
                "place_devices: results go to the CPU or to the target ({}), got {}", to_string(target),
                to_string(results));
  if (target.is_cpu()) return module;
  return map_functions(module, [&](const std::string& name, const Expr& fn) {
    return Placer(module, target, results).rewrite_function(name, fn);
  });
}

}  // namespace nimble::passes
