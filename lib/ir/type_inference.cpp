#include "ir/type_inference.hpp"

#include <fmt/format.h>

#include <map>

#include "ir/op.hpp"
#include "ir/visitor.hpp"
#include "support/check.hpp"
#include "support/stack_guard.hpp"

namespace nimble::ir {
namespace {

[[noreturn]] void fail(const Expr& at, std::string_view what, const std::string& detail) {
  throw Error(ErrorKind::type_error, fmt::format("{}: {} {}", what, detail, describe_site(at)));
}

// Symbol name -> the dim it stands for at one call site.
using SymbolMap = std::map<std::string, Dim, std::less<>>;

std::vector<Type> param_types(const FunctionNode& fn) {
  std::vector<Type> types;
  for (const Expr& p : fn.params) types.push_back(p.as<VarNode>()->type_annotation);
  return types;
}

// Rebuilds `t` bottom-up: `leaf` maps the leaves (tensor types, type
// variables, unknown types); tuples, ADTs and function types are rebuilt
// around the mapped leaves.
template <class Leaf>
Type map_type(const Type& t, const Leaf& leaf) {
  if (!t.defined()) return t;
  switch (t.kind()) {
    case TypeKind::tuple: {
      std::vector<Type> fields;
      for (const Type& f : t.as<TupleTypeNode>()->fields) fields.push_back(map_type(f, leaf));
      return tuple_type(std::move(fields));
    }
    case TypeKind::adt: {
      std::vector<Type> args;
      for (const Type& a : t.as<AdtTypeNode>()->args) args.push_back(map_type(a, leaf));
      return adt_type(t.as<AdtTypeNode>()->name, std::move(args));
    }
    case TypeKind::func: {
      const auto* f = t.as<FuncTypeNode>();
      std::vector<Type> params;
      for (const Type& p : f->params) params.push_back(map_type(p, leaf));
      return func_type(std::move(params), map_type(f->ret, leaf));
    }
    case TypeKind::tensor:
    case TypeKind::type_var:
    case TypeKind::incomplete: return leaf(t);
  }
  return t;
}

// A callee's result type seen from the caller: its symbols replaced by what
// they were bound to; a symbol the arguments did not bind is unknown (Any).
Type substitute_symbols(const Type& t, const SymbolMap& symbols) {
  return map_type(t, [&](const Type& leaf) {
    const auto* tt = leaf.as<TensorTypeNode>();
    if (!tt) return leaf;
    std::vector<Dim> dims;
    for (const Dim& d : tt->shape) {
      auto it = d.is_symbol() ? symbols.find(d.name()) : symbols.end();
      dims.push_back(!d.is_symbol() ? d : it == symbols.end() ? Any : it->second);
    }
    return tensor_type(std::move(dims), tt->dtype);
  });
}

// Replaces the type parameters of an ADT definition by their instantiation.
Type substitute_type_vars(const Type& t, const std::map<std::string, Type, std::less<>>& vars) {
  return map_type(t, [&](const Type& leaf) {
    const auto* v = leaf.as<TypeVarNode>();
    if (!v) return leaf;
    auto it = vars.find(v->name);
    return it == vars.end() ? leaf : it->second;
  });
}

bool is_bool_scalar(const Type& t) {
  const auto* tt = t.as<TensorTypeNode>();
  return tt && tt->dtype == DType::boolean && tt->shape.empty();
}

std::string callee_name(const Expr& callee) {
  if (const auto* g = callee.as<GlobalVarNode>()) return "call of @" + g->name;
  if (const auto* v = callee.as<VarNode>()) return "call of %" + v->name;
  return "call";
}

}  // namespace

std::string describe_site(const Expr& expr) {
  std::string text = print(expr);
  if (const auto nl = text.find('\n'); nl != std::string::npos) text = text.substr(0, nl) + " ...";
  if (text.size() > 100) text = text.substr(0, 97) + "...";
  const std::string loc = to_string(expr->loc);
  if (loc.empty()) return fmt::format("(in `{}`)", text);
  return fmt::format("(in `{}`, built at {})", text, loc);
}

Type TypeInferencer::fresh() {
  unknowns_.emplace_back(make_ref<IncompleteTypeNode>(next_incomplete_++));
  return unknowns_.back();
}

Type TypeInferencer::resolve(const Type& t) const {
  check_stack("type inference");
  return map_type(t, [this](const Type& leaf) {
    if (leaf.kind() != TypeKind::incomplete) return leaf;
    auto it = solutions_.find(leaf.get());
    return it == solutions_.end() ? leaf : resolve(it->second);
  });
}

bool TypeInferencer::has_incomplete(const Type& t) const {
  const Type r = resolve(t);
  switch (r.kind()) {
    case TypeKind::incomplete: return true;
    case TypeKind::tuple:
      for (const Type& f : r.as<TupleTypeNode>()->fields)
        if (has_incomplete(f)) return true;
      return false;
    case TypeKind::adt:
      for (const Type& a : r.as<AdtTypeNode>()->args)
        if (has_incomplete(a)) return true;
      return false;
    case TypeKind::func: {
      const auto* f = r.as<FuncTypeNode>();
      for (const Type& p : f->params)
        if (has_incomplete(p)) return true;
      return has_incomplete(f->ret);
    }
    case TypeKind::tensor:
    case TypeKind::type_var: return false;
  }
  return false;
}

namespace {

// The join lattice on one level; nullopt when the kinds cannot be joined.
struct Joiner {
  std::unordered_map<const TypeNode*, Type>& solutions;
  // Every write to `solutions` with the value it replaced, so that a failed
  // join (or argument match) can be undone: a type error must not leave
  // half-solved unknown types behind.
  std::vector<std::pair<const TypeNode*, std::optional<Type>>> trail;

  void solve(const TypeNode* var, Type t) {
    auto it = solutions.find(var);
    trail.emplace_back(var, it == solutions.end() ? std::nullopt : std::optional<Type>(it->second));
    solutions[var] = std::move(t);
  }
  void rollback() {
    for (auto it = trail.rbegin(); it != trail.rend(); ++it) {
      if (it->second)
        solutions[it->first] = *it->second;
      else
        solutions.erase(it->first);
    }
    trail.clear();
  }

  bool occurs(const TypeNode* var, const Type& t) const {
    if (t.get() == var) return true;
    switch (t.kind()) {
      case TypeKind::incomplete: {
        auto it = solutions.find(t.get());
        return it != solutions.end() && occurs(var, it->second);
      }
      case TypeKind::tuple:
        for (const Type& f : t.as<TupleTypeNode>()->fields)
          if (occurs(var, f)) return true;
        return false;
      case TypeKind::adt:
        for (const Type& a : t.as<AdtTypeNode>()->args)
          if (occurs(var, a)) return true;
        return false;
      case TypeKind::func: {
        const auto* f = t.as<FuncTypeNode>();
        for (const Type& p : f->params)
          if (occurs(var, p)) return true;
        return occurs(var, f->ret);
      }
      default: return false;
    }
  }

  // Follows solutions that are themselves unknown types to the last one of
  // the chain: the unknown type that stands for the whole chain.
  Type representative(Type t) const {
    while (t.kind() == TypeKind::incomplete) {
      auto it = solutions.find(t.get());
      if (it == solutions.end() || it->second.kind() != TypeKind::incomplete) break;
      t = it->second;
    }
    return t;
  }

  std::optional<Type> join(const Type& a_in, const Type& b_in) {
    const Type a = representative(a_in);
    const Type b = representative(b_in);
    if (a.get() == b.get()) return a;
    if (a.kind() == TypeKind::incomplete || b.kind() == TypeKind::incomplete)
      return join_unknowns(a, b);
    if (a.kind() != b.kind()) return std::nullopt;
    switch (a.kind()) {
      case TypeKind::tensor: {
        const auto* x = a.as<TensorTypeNode>();
        const auto* y = b.as<TensorTypeNode>();
        if (x->dtype != y->dtype || x->rank() != y->rank()) return std::nullopt;
        std::vector<Dim> dims;
        for (std::size_t i = 0; i < x->rank(); ++i)
          dims.push_back(x->shape[i] == y->shape[i] ? x->shape[i] : Any);
        return tensor_type(std::move(dims), x->dtype);
      }
      case TypeKind::tuple: {
        const auto& x = a.as<TupleTypeNode>()->fields;
        const auto& y = b.as<TupleTypeNode>()->fields;
        if (x.size() != y.size()) return std::nullopt;
        std::vector<Type> fields;
        for (std::size_t i = 0; i < x.size(); ++i) {
          auto f = join(x[i], y[i]);
          if (!f) return std::nullopt;
          fields.push_back(*f);
        }
        return tuple_type(std::move(fields));
      }
      case TypeKind::adt: {
        const auto* x = a.as<AdtTypeNode>();
        const auto* y = b.as<AdtTypeNode>();
        if (x->name != y->name || x->args.size() != y->args.size()) return std::nullopt;
        std::vector<Type> args;
        for (std::size_t i = 0; i < x->args.size(); ++i) {
          auto t = join(x->args[i], y->args[i]);
          if (!t) return std::nullopt;
          args.push_back(*t);
        }
        return adt_type(x->name, std::move(args));
      }
      case TypeKind::func: {
        const auto* x = a.as<FuncTypeNode>();
        const auto* y = b.as<FuncTypeNode>();
        if (x->params.size() != y->params.size()) return std::nullopt;
        for (std::size_t i = 0; i < x->params.size(); ++i)
          if (!(x->params[i] == y->params[i])) return std::nullopt;
        auto ret = join(x->ret, y->ret);
        if (!ret) return std::nullopt;
        return func_type(x->params, *ret);
      }
      case TypeKind::type_var:
        if (a.as<TypeVarNode>()->name == b.as<TypeVarNode>()->name) return a;
        return std::nullopt;
      case TypeKind::incomplete: break;
    }
    return std::nullopt;
  }

  // At least one of a, b (both representatives) is an unknown type. An
  // unsolved one takes the other side; a solved one widens its solution to
  // the join (ADTs are immutable, so widening is sound). Two unknown types are
  // merged into one.
  std::optional<Type> join_unknowns(const Type& a, const Type& b) {
    if (a.kind() != TypeKind::incomplete) return join_unknowns(b, a);
    auto a_it = solutions.find(a.get());
    if (a_it == solutions.end()) {
      if (occurs(a.get(), b)) return std::nullopt;
      solve(a.get(), b);
      return a;
    }
    const Type a_solution = a_it->second;  // a known type: a is a representative
    Type other = b;
    if (b.kind() == TypeKind::incomplete) {
      auto b_it = solutions.find(b.get());
      if (b_it == solutions.end()) {
        if (occurs(b.get(), a)) return std::nullopt;
        solve(b.get(), a);
        return a;
      }
      other = b_it->second;
      solve(b.get(), a);  // b now stands for a
    }
    auto joined = join(a_solution, other);
    if (!joined) return std::nullopt;
    if (representative(*joined).get() != a.get()) {
      if (occurs(a.get(), *joined)) return std::nullopt;
      solve(a.get(), *joined);
    }
    return a;
  }
};

}  // namespace

Type TypeInferencer::join(const Type& a, const Type& b, const Expr& at, const std::string& what) {
  Joiner joiner{solutions_, {}};
  auto joined = joiner.join(a, b);
  if (!joined) {
    joiner.rollback();
    fail(at, what, fmt::format("{} vs {}", to_string(resolve(a)), to_string(resolve(b))));
  }
  return *joined;
}

namespace {

// Whether a value of type `actual` can be passed where `expected` is
// declared. Fixed dims must agree; Any and symbols are checked at run time.
// Symbols of `expected` bind to the caller's dims in `symbols` (and must
// agree between uses); unknown types on either side are solved by joining.
struct ArgumentMatcher {
  Joiner& joiner;
  SymbolMap& symbols;
  // The symbols of the enclosing function's parameters, when checking a type
  // inside that function (a return type, a let annotation): there `n` is the
  // caller's n, which a fixed dim cannot be assumed to equal.
  const SymbolSet* rigid = nullptr;

  bool match(const Type& expected, const Type& actual) {
    // Unknown types (an ADT's type arguments) are solved by joining; an
    // unknown argument type takes the declared one, seen from the caller.
    if (expected.kind() == TypeKind::incomplete) return joiner.join(expected, actual).has_value();
    if (actual.kind() == TypeKind::incomplete)
      return joiner.join(actual, substitute_symbols(expected, symbols)).has_value();
    if (expected.kind() != actual.kind()) return false;
    switch (expected.kind()) {
      case TypeKind::tensor: {
        const auto* e = expected.as<TensorTypeNode>();
        const auto* a = actual.as<TensorTypeNode>();
        if (e->dtype != a->dtype || e->rank() != a->rank()) return false;
        for (std::size_t i = 0; i < e->rank(); ++i)
          if (!match_dim(e->shape[i], a->shape[i])) return false;
        return true;
      }
      case TypeKind::tuple: {
        const auto& e = expected.as<TupleTypeNode>()->fields;
        const auto& a = actual.as<TupleTypeNode>()->fields;
        if (e.size() != a.size()) return false;
        for (std::size_t i = 0; i < e.size(); ++i)
          if (!match(e[i], a[i])) return false;
        return true;
      }
      case TypeKind::adt: {
        const auto* e = expected.as<AdtTypeNode>();
        const auto* a = actual.as<AdtTypeNode>();
        if (e->name != a->name || e->args.size() != a->args.size()) return false;
        for (std::size_t i = 0; i < e->args.size(); ++i)
          if (!match(e->args[i], a->args[i])) return false;
        return true;
      }
      case TypeKind::func: {
        const auto* e = expected.as<FuncTypeNode>();
        const auto* a = actual.as<FuncTypeNode>();
        if (e->params.size() != a->params.size()) return false;
        // A function value's own symbols are unrelated to the call's.
        SymbolMap own;
        ArgumentMatcher inner{joiner, own, nullptr};
        for (std::size_t i = 0; i < e->params.size(); ++i)
          if (!inner.match(e->params[i], a->params[i])) return false;
        return inner.match(e->ret, a->ret);
      }
      case TypeKind::type_var:
        return expected.as<TypeVarNode>()->name == actual.as<TypeVarNode>()->name;
      case TypeKind::incomplete: break;
    }
    return false;
  }

  bool match_dim(const Dim& expected, const Dim& actual) {
    if (expected.is_any()) return true;
    if (expected.is_fixed()) return !actual.is_fixed() || actual.value() == expected.value();
    if (const auto bound = expected.upper_bound(); bound && actual.is_fixed() && actual.value() > *bound)
      return false;
    if (rigid && rigid->count(expected.name())) return !actual.is_fixed();
    auto it = symbols.find(expected.name());
    if (it == symbols.end()) {
      symbols.emplace(expected.name(), actual);
      return true;
    }
    Dim& bound = it->second;
    if (bound.is_fixed() && actual.is_fixed()) return bound.value() == actual.value();
    if (!bound.is_fixed() && actual.is_fixed()) bound = actual;  // the more specific
    return true;
  }
};

// Whether `actual` can be used where `expected` is declared (see
// ArgumentMatcher); on failure every unknown type it solved is restored.
bool match_types(std::unordered_map<const TypeNode*, Type>& solutions, const Type& expected,
                 const Type& actual, SymbolMap& symbols, const SymbolSet* rigid) {
  Joiner joiner{solutions, {}};
  ArgumentMatcher matcher{joiner, symbols, rigid};
  if (matcher.match(expected, actual)) return true;
  joiner.rollback();
  return false;
}

void add_symbols(const Type& t, SymbolSet& out) {
  switch (t.kind()) {
    case TypeKind::tensor:
      for (const Dim& d : t.as<TensorTypeNode>()->shape)
        if (d.is_symbol()) out.insert(d.name());
      return;
    case TypeKind::tuple:
      for (const Type& f : t.as<TupleTypeNode>()->fields) add_symbols(f, out);
      return;
    case TypeKind::adt:
      for (const Type& a : t.as<AdtTypeNode>()->args) add_symbols(a, out);
      return;
    default: return;
  }
}

}  // namespace

Type TypeInferencer::bind_var(const Expr& v, const Type& value_type, const Expr& at) {
  const auto* var_node = v.as<VarNode>();
  if (!var_node->type_annotation.defined()) {
    v->checked_type = value_type;
    return value_type;
  }
  SymbolMap symbols;
  if (!match_types(solutions_, var_node->type_annotation, resolve(value_type), symbols,
                   &rigid_symbols_))
    fail(at, "let %" + var_node->name,
         fmt::format("the value's type {} does not match the annotation {}",
                     to_string(resolve(value_type)), to_string(var_node->type_annotation)));
  v->checked_type = var_node->type_annotation;
  return var_node->type_annotation;
}

Type TypeInferencer::infer(const Expr& expr) {
  std::vector<const ExprNode*> lets;
  Expr cur = expr;
  while (const auto* let = cur.as<LetNode>()) {
    // A function bound by a let may call itself when its signature is
    // declared (a local loop): its variable is typed before its body.
    if (const auto* fn = let->value.as<FunctionNode>(); fn && fn->ret_type.defined())
      let->var->checked_type = func_type(param_types(*fn), fn->ret_type);
    bind_var(let->var, infer(let->value), cur);
    lets.push_back(cur.get());
    cur = let->body;
  }
  const Type t = infer_node(cur);
  cur->checked_type = t;
  for (const ExprNode* let : lets) let->checked_type = t;
  return t;
}

Type TypeInferencer::infer_node(const Expr& expr) {
  check_stack("type inference");
  switch (expr.kind()) {
    case ExprKind::var: {
      const Type& t = expr->checked_type;
      if (!t.defined())
        fail(expr, "type inference",
             fmt::format("%{} is used where it is not bound", expr.as<VarNode>()->name));
      return t;
    }
    case ExprKind::constant: {
      const Tensor& value = expr.as<ConstantNode>()->value;
      std::vector<Dim> dims(value.shape().begin(), value.shape().end());
      return tensor_type(std::move(dims), value.dtype());
    }
    case ExprKind::global_var: return global_type(expr.as<GlobalVarNode>()->name, expr);
    case ExprKind::op:
      fail(expr, std::string(expr.as<OpNode>()->def->name),
           "an operator can only be called, not used as a value");
    case ExprKind::constructor: {
      std::vector<Type> fields;
      const Type adt = instantiate_constructor(*expr.as<ConstructorNode>(), fields);
      return fields.empty() ? adt : func_type(std::move(fields), adt);
    }
    case ExprKind::call: return infer_call(expr, *expr.as<CallNode>());
    case ExprKind::let: return infer(expr);
    case ExprKind::if_: {
      const auto& n = *expr.as<IfNode>();
      const Type cond = resolve(infer(n.cond));
      if (!is_bool_scalar(cond))
        fail(expr, "if", fmt::format("the condition must be bool[], got {}", to_string(cond)));
      const Type then_type = infer(n.then_branch);
      const Type else_type = infer(n.else_branch);
      return join(then_type, else_type, expr, "if: the branches have incompatible types");
    }
    case ExprKind::tuple: {
      std::vector<Type> fields;
      for (const Expr& f : expr.as<TupleNode>()->fields) fields.push_back(infer(f));
      return tuple_type(std::move(fields));
    }
    case ExprKind::tuple_get: {
      const auto& n = *expr.as<TupleGetNode>();
      const Type t = resolve(infer(n.tuple));
      const auto* tt = t.as<TupleTypeNode>();
      if (!tt) fail(expr, "tuple_get", fmt::format("expected a tuple, got {}", to_string(t)));
      if (n.index >= tt->fields.size())
        fail(expr, "tuple_get",
             fmt::format("index {} is out of range for {}", n.index, to_string(t)));
      return tt->fields[n.index];
    }
    case ExprKind::function: return infer_function(expr, *expr.as<FunctionNode>(), "function");
    case ExprKind::match: return infer_match(expr, *expr.as<MatchNode>());
  }
  NIMBLE_ASSERT(false, "infer_node: unknown expression kind");
  return {};
}

Type TypeInferencer::instantiate_constructor(const ConstructorNode& ctor,
                                             std::vector<Type>& field_types) {
  std::map<std::string, Type, std::less<>> vars;
  std::vector<Type> args;
  for (const std::string& p : ctor.adt->type_params) {
    args.push_back(fresh());
    vars.emplace(p, args.back());
  }
  field_types.clear();
  for (const Type& f : ctor.def().fields) field_types.push_back(substitute_type_vars(f, vars));
  return adt_type(ctor.adt->name, std::move(args));
}

Type TypeInferencer::infer_call(const Expr& expr, const CallNode& call) {
  const Expr& callee = call.callee;
  std::vector<Type> args;
  for (const Expr& a : call.args) args.push_back(infer(a));

  if (const auto* op = callee.as<OpNode>()) {
    const OpDef& def = *op->def;
    const std::string name(def.name);
    if (args.size() != def.arg_names.size())
      fail(expr, name, fmt::format("expected {} arguments, got {}", def.arg_names.size(),
                                   args.size()));
    for (std::size_t i = 0; i < args.size(); ++i) {
      args[i] = resolve(args[i]);
      if (has_incomplete(args[i]))
        fail(expr, name,
             fmt::format("the type of {} is not known ({}); annotate the variable",
                         def.arg_names[i], to_string(args[i])));
    }
    try {
      check_attrs(def, call.attrs);
    } catch (const Error& e) {  // the message already names the op
      throw Error(e.kind(), fmt::format("{} {}", e.message(), describe_site(expr)));
    }
    try {
      return def.type_relation(args, call.attrs);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::type_error) throw;
      fail(expr, name, e.message());
    }
  }

  std::string what;
  Type callee_type;
  if (const auto* ctor = callee.as<ConstructorNode>()) {
    what = ctor->def().name;
    std::vector<Type> fields;
    const Type result = instantiate_constructor(*ctor, fields);
    callee_type = func_type(std::move(fields), result);
    callee->checked_type = callee_type;
  } else {
    what = callee_name(callee);
    callee_type = resolve(infer(callee));
  }
  const auto* fn = callee_type.as<FuncTypeNode>();
  if (!fn)
    fail(expr, what,
         fmt::format("the callee must be a function, got {}", to_string(callee_type)));
  if (fn->params.size() != args.size())
    fail(expr, what,
         fmt::format("expected {} arguments, got {}", fn->params.size(), args.size()));
  SymbolMap symbols;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Type actual = resolve(args[i]);
    if (!match_types(solutions_, fn->params[i], actual, symbols, nullptr))
      fail(expr, what,
           fmt::format("argument {} must be {}, got {}", i + 1, to_string(resolve(fn->params[i])),
                       to_string(actual)));
  }
  return substitute_symbols(fn->ret, symbols);
}

Type TypeInferencer::infer_function(const Expr& expr, const FunctionNode& fn,
                                    const std::string& what) {
  for (const Expr& p : fn.params) p->checked_type = p.as<VarNode>()->type_annotation;
  if (fn.ret_type.defined()) expr->checked_type = func_type(param_types(fn), fn.ret_type);
  // Inside the body, the parameters' symbols are fixed by the caller.
  const SymbolSet outer_rigid = rigid_symbols_;
  struct Restore {
    SymbolSet& target;
    const SymbolSet& saved;
    ~Restore() { target = saved; }
  } restore{rigid_symbols_, outer_rigid};
  for (const Expr& p : fn.params) add_symbols(p.as<VarNode>()->type_annotation, rigid_symbols_);
  const Type body = infer(fn.body);
  if (!fn.ret_type.defined()) return func_type(param_types(fn), body);
  SymbolMap symbols;
  if (!match_types(solutions_, fn.ret_type, resolve(body), symbols, &rigid_symbols_))
    fail(expr, what,
         fmt::format("the body's type {} does not match the declared return type {}",
                     to_string(resolve(body)), to_string(fn.ret_type)));
  return func_type(param_types(fn), fn.ret_type);
}

void TypeInferencer::bind_pattern(const Pattern& pattern, const Type& type, const Expr& at) {
  check_stack("type inference (patterns)");
  switch (pattern.kind()) {
    case PatternKind::wildcard: return;
    case PatternKind::var: bind_var(pattern.as<PatternVarNode>()->var, type, at); return;
    case PatternKind::constructor: {
      const auto& p = *pattern.as<PatternConstructorNode>();
      const auto& ctor = *p.ctor.as<ConstructorNode>();
      std::vector<Type> fields;
      const Type adt = instantiate_constructor(ctor, fields);
      const Type actual = resolve(type);
      const auto* actual_adt = actual.as<AdtTypeNode>();
      if (actual.kind() != TypeKind::incomplete &&
          (!actual_adt || actual_adt->name != ctor.adt->name))
        fail(at, "match",
             fmt::format("pattern {} is a constructor of {}, but the value is {}",
                         ctor.def().name, ctor.adt->name, to_string(actual)));
      if (p.fields.size() != fields.size())
        fail(at, "match",
             fmt::format("pattern {} expects {} fields, got {}", ctor.def().name, fields.size(),
                         p.fields.size()));
      join(adt, type, at, "match: the pattern does not fit the value");
      for (std::size_t i = 0; i < fields.size(); ++i) bind_pattern(p.fields[i], fields[i], at);
      return;
    }
    case PatternKind::tuple: {
      const auto& p = *pattern.as<PatternTupleNode>();
      const Type actual = resolve(type);
      const auto* tt = actual.as<TupleTypeNode>();
      if (!tt || tt->fields.size() != p.fields.size())
        fail(at, "match",
             fmt::format("a tuple pattern of {} fields cannot match {}", p.fields.size(),
                         to_string(actual)));
      for (std::size_t i = 0; i < p.fields.size(); ++i)
        bind_pattern(p.fields[i], tt->fields[i], at);
      return;
    }
  }
}

Type TypeInferencer::infer_match(const Expr& expr, const MatchNode& match) {
  const Type value = infer(match.value);
  Type result;
  for (const Clause& clause : match.clauses) {
    bind_pattern(clause.pattern, value, expr);
    const Type body = infer(clause.body);
    result = result.defined()
                 ? join(result, body, expr, "match: the clauses have incompatible types")
                 : body;
  }
  return result;
}

Type TypeInferencer::global_type(const std::string& name, const Expr& at) {
  check_stack("type inference (globals)");
  if (auto it = global_types_.find(name); it != global_types_.end()) return it->second;
  const Expr fn_expr = module_.find_function(name);
  if (!fn_expr.defined())
    fail(at, "type inference", fmt::format("@{} is not a function of this module", name));
  const auto& fn = *fn_expr.as<FunctionNode>();
  if (fn.ret_type.defined()) {
    Type t = func_type(param_types(fn), fn.ret_type);
    global_types_.emplace(name, t);
    return t;
  }
  if (in_progress_.count(name))
    fail(at, "type inference", fmt::format("@{} is recursive: declare its return type", name));
  infer_global(name);
  return global_types_.at(name);
}

void TypeInferencer::infer_global(const std::string& name) {
  if (inferred_.count(name)) return;
  const Expr fn_expr = module_.find_function(name);
  NIMBLE_ASSERT(fn_expr.defined(), "infer_global: unknown function");
  in_progress_.insert(name);
  const Type t = infer_function(fn_expr, *fn_expr.as<FunctionNode>(), "@" + name);
  in_progress_.erase(name);
  fn_expr->checked_type = t;
  global_types_.emplace(name, t);
  inferred_.insert(name);
}

void TypeInferencer::finalize(const Expr& expr) {
  struct Finalizer : ExprVisitor {
    TypeInferencer& inferencer;
    explicit Finalizer(TypeInferencer& i) : inferencer(i) {}
    void settle(const Expr& e) {
      if (!e->checked_type.defined()) return;
      e->checked_type = inferencer.resolve(e->checked_type);
      if (inferencer.has_incomplete(e->checked_type))
        fail(e, "type inference",
             fmt::format("cannot infer the type {}; annotate the variable or the function's "
                         "return type",
                         to_string(e->checked_type)));
    }
    // Post-order, so that an unsolved type is reported at the innermost node.
    void leave(const Expr& e) override { settle(e); }
  };
  Finalizer finalizer(*this);
  finalizer.visit(expr);
}

void infer_types(const Module& module) {
  TypeInferencer inferencer(module);
  for (const auto& [name, fn] : module.functions()) inferencer.infer_global(name);
  for (const auto& [name, fn] : module.functions()) inferencer.finalize(fn);
}

}  // namespace nimble::ir
