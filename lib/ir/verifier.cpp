// The IR verifier: well-formedness independent of types. Run after building
// and after every pass in debug builds.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "ir/op.hpp"
#include "ir/type_inference.hpp"
#include "nimble/ir/module.hpp"
#include "support/check.hpp"
#include "support/stack_guard.hpp"

namespace nimble::ir {
namespace {

[[noreturn]] void ill_formed(const Expr& at, const std::string& problem) {
  throw Error(ErrorKind::invalid_argument,
              fmt::format("ill-formed IR: {} {}", problem, describe_site(at)));
}

class Verifier {
 public:
  explicit Verifier(const Module& module) : module_(module) {}

  void run() {
    for (const AdtDef& adt : module_.adts()) check_adt(*adt);
    for (const std::string& entry : module_.entries())
      if (!module_.find_function(entry).defined())
        throw_error(ErrorKind::invalid_argument,
                    "ill-formed IR: entry point @{} is not a function of the module", entry);
    for (const auto& [name, fn] : module_.functions()) {
      scope_.clear();
      current_ = name;
      check(fn);
    }
  }

 private:
  void check_adt(const AdtDefNode& adt) {
    const std::unordered_set<std::string> params(adt.type_params.begin(), adt.type_params.end());
    if (params.size() != adt.type_params.size())
      throw_error(ErrorKind::invalid_argument,
                  "ill-formed IR: type {} declares a type parameter twice", adt.name);
    if (adt.constructors.empty())
      throw_error(ErrorKind::invalid_argument, "ill-formed IR: type {} has no constructors",
                  adt.name);
    for (const ConstructorDef& c : adt.constructors)
      for (const Type& f : c.fields) check_type(f, &params, "constructor " + c.name);
  }

  // Every ADT a type mentions exists with the right number of arguments;
  // type variables appear only inside ADT definitions, as their parameters.
  void check_type(const Type& t, const std::unordered_set<std::string>* type_params,
                  const std::string& where) {
    if (!t.defined()) return;
    switch (t.kind()) {
      case TypeKind::tensor: return;
      case TypeKind::incomplete:
        throw_error(ErrorKind::invalid_argument, "ill-formed IR: {}: the type {} is not known",
                    where, to_string(t));
      case TypeKind::tuple:
        for (const Type& f : t.as<TupleTypeNode>()->fields) check_type(f, type_params, where);
        return;
      case TypeKind::func: {
        const auto* f = t.as<FuncTypeNode>();
        for (const Type& p : f->params) check_type(p, type_params, where);
        check_type(f->ret, type_params, where);
        return;
      }
      case TypeKind::adt: {
        const auto* a = t.as<AdtTypeNode>();
        const AdtDef def = module_.find_adt(a->name);
        if (!def)
          throw_error(ErrorKind::invalid_argument, "ill-formed IR: {}: unknown type {}", where,
                      a->name);
        if (def->type_params.size() != a->args.size())
          throw_error(ErrorKind::invalid_argument,
                      "ill-formed IR: {}: type {} takes {} type arguments, got {}", where,
                      a->name, def->type_params.size(), a->args.size());
        for (const Type& arg : a->args) check_type(arg, type_params, where);
        return;
      }
      case TypeKind::type_var: {
        const auto& name = t.as<TypeVarNode>()->name;
        if (!type_params || !type_params->count(name))
          throw_error(ErrorKind::invalid_argument, "ill-formed IR: {}: unknown type {}", where,
                      name);
        return;
      }
    }
  }

  void bind(const Expr& v) {
    const auto* node = v.as<VarNode>();
    if (!bound_.insert(node).second)
      ill_formed(v, fmt::format("%{} is bound more than once", node->name));
    check_type(node->type_annotation, nullptr, "%" + node->name);
    scope_.insert(node);
  }
  void unbind(const Expr& v) { scope_.erase(v.as<VarNode>()); }

  void check(const Expr& e) {
    check_stack("the verifier");
    switch (e.kind()) {
      case ExprKind::var:
        if (!scope_.count(e.as<VarNode>()))
          ill_formed(e, fmt::format("%{} is used where it is not bound", e.as<VarNode>()->name));
        return;
      case ExprKind::constant:
      case ExprKind::op: return;
      case ExprKind::global_var:
        if (!module_.find_function(e.as<GlobalVarNode>()->name).defined())
          ill_formed(e, fmt::format("@{} is not a function of this module",
                                    e.as<GlobalVarNode>()->name));
        return;
      case ExprKind::constructor: check_constructor(e); return;
      case ExprKind::call: {
        const auto& n = *e.as<CallNode>();
        check(n.callee);
        for (const Expr& a : n.args) check(a);
        if (const auto* op = n.callee.as<OpNode>()) {
          if (n.args.size() != op->def->arg_names.size())
            ill_formed(e, fmt::format("{} takes {} arguments, got {}", op->def->name,
                                      op->def->arg_names.size(), n.args.size()));
        } else if (!n.attrs.empty()) {
          ill_formed(e, "only operator calls take attributes");
        }
        if (const auto* ctor = n.callee.as<ConstructorNode>())
          if (n.args.size() != ctor->def().fields.size())
            ill_formed(e, fmt::format("{} takes {} fields, got {}", ctor->def().name,
                                      ctor->def().fields.size(), n.args.size()));
        return;
      }
      case ExprKind::let: check_let_chain(e); return;
      case ExprKind::if_: {
        const auto& n = *e.as<IfNode>();
        check(n.cond);
        check(n.then_branch);
        check(n.else_branch);
        return;
      }
      case ExprKind::tuple:
        for (const Expr& f : e.as<TupleNode>()->fields) check(f);
        return;
      case ExprKind::tuple_get: check(e.as<TupleGetNode>()->tuple); return;
      case ExprKind::function: {
        const auto& n = *e.as<FunctionNode>();
        check_type(n.ret_type, nullptr, "return type");
        // A primitive function captures nothing: only its parameters are in scope.
        std::unordered_set<const VarNode*> outer;
        if (n.primitive) {
          check_primitive_body(n.body);
          outer.swap(scope_);
        }
        for (const Expr& p : n.params) bind(p);
        check(n.body);
        for (const Expr& p : n.params) unbind(p);
        if (n.primitive) outer.swap(scope_);
        return;
      }
      case ExprKind::match: {
        const auto& n = *e.as<MatchNode>();
        check(n.value);
        for (const Clause& c : n.clauses) {
          std::vector<Expr> vars;
          check_pattern(c.pattern, e, vars);
          check(c.body);
          for (const Expr& v : vars) unbind(v);
        }
        return;
      }
    }
  }

  // A primitive function's body: lets of calls of ops with compute rules on
  // variables and constants (or tuples of them), ending in one of its
  // variables or such a call.
  static void check_primitive_body(const Expr& body) {
    auto check_call = [](const Expr& value) {
      const auto* call = value.as<CallNode>();
      const auto* op = call ? call->callee.as<OpNode>() : nullptr;
      if (!op || op->def->pattern == OpPattern::opaque)
        ill_formed(value, "a primitive function computes only calls of fusable ops");
      const auto leaf = [](const Expr& a) { return a.as<VarNode>() || a.as<ConstantNode>(); };
      for (const Expr& a : call->args) {
        // A tuple of them too: concatenate's parts, written in place.
        const auto* tuple = a.as<TupleNode>();
        if (!leaf(a) && !(tuple && std::all_of(tuple->fields.begin(), tuple->fields.end(), leaf)))
          ill_formed(a, "a primitive function's op arguments are variables, constants or tuples of them");
      }
    };
    Expr cur = body;
    while (const auto* let = cur.as<LetNode>()) {
      check_call(let->value);
      cur = let->body;
    }
    if (!cur.as<VarNode>()) check_call(cur);
  }

  // Iterative over the chain; a let's variable is visible in its body, and
  // in its own value when that value is a function (a local recursive loop).
  void check_let_chain(const Expr& e) {
    std::vector<Expr> vars;
    Expr cur = e;
    while (const auto* let = cur.as<LetNode>()) {
      const bool recursive = let->value.as<FunctionNode>() != nullptr;
      if (recursive) bind(let->var);
      check(let->value);
      if (!recursive) bind(let->var);
      vars.push_back(let->var);
      cur = let->body;
    }
    check(cur);
    for (const Expr& v : vars) unbind(v);
  }

  void check_constructor(const Expr& e) {
    const auto& ctor = *e.as<ConstructorNode>();
    if (module_.find_adt(ctor.adt->name) != ctor.adt)
      ill_formed(e, fmt::format("constructor {} belongs to a type {} that is not this module's",
                                ctor.def().name, ctor.adt->name));
  }

  void check_pattern(const Pattern& p, const Expr& at, std::vector<Expr>& vars) {
    check_stack("the verifier (patterns)");
    switch (p.kind()) {
      case PatternKind::wildcard: return;
      case PatternKind::var: {
        const Expr& v = p.as<PatternVarNode>()->var;
        bind(v);
        vars.push_back(v);
        return;
      }
      case PatternKind::constructor: {
        const auto& c = *p.as<PatternConstructorNode>();
        check_constructor(c.ctor);
        const auto& def = c.ctor.as<ConstructorNode>()->def();
        if (c.fields.size() != def.fields.size())
          ill_formed(at, fmt::format("pattern {} has {} fields, but {} takes {}", def.name,
                                     c.fields.size(), def.name, def.fields.size()));
        for (const Pattern& f : c.fields) check_pattern(f, at, vars);
        return;
      }
      case PatternKind::tuple:
        for (const Pattern& f : p.as<PatternTupleNode>()->fields) check_pattern(f, at, vars);
        return;
    }
  }

  const Module& module_;
  std::string current_;
  std::unordered_set<const VarNode*> scope_;
  std::unordered_set<const VarNode*> bound_;
};

}  // namespace

void verify(const Module& module) { Verifier(module).run(); }

}  // namespace nimble::ir
