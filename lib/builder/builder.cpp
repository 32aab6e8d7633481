#include "nimble/builder.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "ir/op.hpp"
#include "ir/type_inference.hpp"
#include "ops/ops.hpp"
#include "support/check.hpp"

namespace nimble {

using ir::SourceLoc;

Type tensor_t(std::vector<Dim> shape, DType dtype) { return ir::tensor_type(std::move(shape), dtype); }
Type tuple_t(std::vector<Type> fields) { return ir::tuple_type(std::move(fields)); }
Type fn_t(std::vector<Type> params, Type ret) { return ir::func_type(std::move(params), std::move(ret)); }
Type adt_t(std::string name, std::vector<Type> args) { return ir::adt_type(std::move(name), std::move(args)); }
Type type_param(std::string name) { return ir::type_var(std::move(name)); }

namespace {

// The statements of one body being built, in order.
struct Scope {
  std::vector<std::pair<Expr, Expr>> lets;  // (var, value)
};

struct Signature {
  std::vector<Param> params;
  Type ret;
  bool defined = false;
  Loc loc;
};

// Thrown inside a loop body when the loop's state types widened, so that the
// body is built again with the wider types.
struct LoopStateWidened {};

}  // namespace

struct Builder::State {
  ir::Module module;
  ir::TypeInferencer inferencer{module};
  std::map<std::string, Signature, std::less<>> signatures;
  std::vector<Scope> scopes;
  Adt list, option;
};

namespace {

thread_local Builder::State* g_state = nullptr;

[[noreturn]] void builder_error(Loc loc, const std::string& message) {
  throw Error(ErrorKind::invalid_argument,
              fmt::format("{} (built at {})", message, ir::to_string(SourceLoc::from(loc))));
}

Builder::State& state(Loc loc) {
  if (!g_state || g_state->scopes.empty())
    builder_error(loc, "builder: statements must be built inside the body of Builder::def");
  return *g_state;
}

// Type-checks `value` and binds it to a new variable in the current body.
Expr bind_statement(Expr value, std::string_view hint, Loc loc) {
  Builder::State& s = state(loc);
  const Type type = s.inferencer.infer(value);
  Expr v = ir::var(std::string(hint), {}, SourceLoc::from(loc));
  v->checked_type = type;
  s.scopes.back().lets.emplace_back(v, std::move(value));
  return v;
}

void push_scope() { g_state->scopes.emplace_back(); }

// Closes the innermost body: its statements become lets around `result`.
Expr pop_scope(Expr result) {
  Scope scope = std::move(g_state->scopes.back());
  g_state->scopes.pop_back();
  Expr body = std::move(result);
  for (auto it = scope.lets.rbegin(); it != scope.lets.rend(); ++it)
    body = ir::let(it->first, it->second, body, it->first->loc);
  return body;
}

// Restores the scope stack if building a body throws.
class ScopeGuard {
 public:
  explicit ScopeGuard(Builder::State& s) : state_(s), depth_(s.scopes.size()) { push_scope(); }
  ~ScopeGuard() { state_.scopes.resize(depth_); }
  Expr close(Expr result) { return pop_scope(std::move(result)); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Builder::State& state_;
  std::size_t depth_;
};

Expr op_call(const ir::OpDef& op, std::vector<Expr> args, ir::Attrs attrs, Loc loc) {
  const SourceLoc sl = SourceLoc::from(loc);
  return bind_statement(ir::call(ir::op_ref(op, sl), std::move(args), std::move(attrs), sl), op.name, loc);
}

std::vector<Expr> make_params(const std::vector<Param>& params, Loc loc) {
  std::vector<Expr> vars;
  for (const Param& p : params) {
    if (!p.type.defined()) builder_error(loc, fmt::format("parameter '{}' needs a type", p.name));
    Expr v = ir::var(p.name, p.type, SourceLoc::from(loc));
    v->checked_type = p.type;
    vars.push_back(std::move(v));
  }
  return vars;
}

std::vector<Type> types_of(const std::vector<Param>& params) {
  std::vector<Type> types;
  for (const Param& p : params) types.push_back(p.type);
  return types;
}

DType dtype_of_expr(const Expr& e, Loc loc) {
  Builder::State& s = state(loc);
  const Type t = s.inferencer.resolve(s.inferencer.infer(e));
  const auto* tt = t.as<ir::TensorTypeNode>();
  if (!tt) builder_error(loc, fmt::format("expected a tensor, got {}", ir::to_string(t)));
  return tt->dtype;
}

}  // namespace

// --- Builder ---------------------------------------------------------------------------

Builder::Builder() : state_(std::make_unique<State>()) {}
Builder::~Builder() = default;

Adt Builder::adt(std::string name, std::vector<std::string> type_params,
                 std::vector<std::pair<std::string, std::vector<Type>>> constructors) {
  std::vector<ir::ConstructorDef> ctors;
  for (auto& [ctor_name, fields] : constructors) ctors.push_back({ctor_name, fields});
  ir::AdtDef def = make_ref<ir::AdtDefNode>(std::move(name), std::move(type_params), std::move(ctors));
  state_->module.add_adt(def);
  return Adt(def);
}

Adt Builder::list() {
  if (!state_->list.def())
    state_->list = adt("List", {"T"},
                       {{"Nil", {}}, {"Cons", {type_param("T"), adt_t("List", {type_param("T")})}}});
  return state_->list;
}

Adt Builder::option() {
  if (!state_->option.def())
    state_->option = adt("Option", {"T"}, {{"None", {}}, {"Some", {type_param("T")}}});
  return state_->option;
}

Function Builder::declare(std::string name, std::vector<Param> params, Type ret, Loc loc) {
  if (!ret.defined())
    builder_error(loc, fmt::format("declare @{}: a declared function needs its return type", name));
  return declare_impl(std::move(name), std::move(params), std::move(ret), loc);
}

Function Builder::declare_impl(std::string name, std::vector<Param> params, Type ret, Loc loc) {
  if (state_->signatures.count(name))
    builder_error(loc, fmt::format("function @{} is already declared", name));
  if (ret.defined()) state_->inferencer.declare_global(name, ir::func_type(types_of(params), ret));
  state_->signatures.emplace(name, Signature{std::move(params), std::move(ret), false, loc});
  return Function(std::move(name));
}

void Builder::define_impl(const Function& fn, const detail::BodyFn& body, Loc loc) {
  auto it = state_->signatures.find(fn.name());
  if (it == state_->signatures.end())
    builder_error(loc, fmt::format("define: @{} was not declared by this builder", fn.name()));
  Signature& sig = it->second;
  if (sig.defined) builder_error(loc, fmt::format("define: @{} is already defined", fn.name()));
  if (g_state) builder_error(loc, "define: functions cannot be defined inside another body");

  g_state = state_.get();
  struct Reset {
    ~Reset() { g_state = nullptr; }
  } reset;
  std::vector<Expr> params = make_params(sig.params, loc);
  ScopeGuard scope(*state_);
  Expr result = body(params);
  Expr fn_expr = ir::function(std::move(params), sig.ret, scope.close(std::move(result)),
                              SourceLoc::from(loc));
  const Type type = state_->inferencer.infer_global_function(fn_expr, fn.name());
  fn_expr->checked_type = type;
  state_->inferencer.declare_global(fn.name(), type);
  state_->module.add_function(fn.name(), fn_expr);
  sig.defined = true;
}

void Builder::entry(const Function& fn) { state_->module.add_entry(fn.name()); }

const ir::Module& Builder::module() const { return state_->module; }

ir::Module Builder::build() {
  for (const auto& [name, sig] : state_->signatures)
    if (!sig.defined)
      builder_error(sig.loc, fmt::format("function @{} is declared but never defined", name));
  ir::verify(state_->module);
  ir::infer_types(state_->module);
  return state_->module;
}

// --- Handles ---------------------------------------------------------------------------

Expr Function::call(std::vector<Expr> args, Loc loc) const {
  const SourceLoc sl = SourceLoc::from(loc);
  return bind_statement(ir::call(ir::global_var(name_, sl), std::move(args), {}, sl), name_, loc);
}

Expr Constructor::node(Loc loc) const {
  return ir::constructor(adt_, name(), SourceLoc::from(loc));
}

Expr Constructor::operator()(std::vector<Expr> fields, Loc loc) const {
  if (fields.empty() && arity() == 0) return node(loc);
  const SourceLoc sl = SourceLoc::from(loc);
  return bind_statement(ir::call(node(loc), std::move(fields), {}, sl), name(), loc);
}

Value Constructor::value(std::vector<Value> fields) const {
  if (fields.size() != arity())
    throw_error(ErrorKind::invalid_argument, "{}: expected {} fields, got {}", name(), arity(),
                fields.size());
  return Value::adt(tag_, std::move(fields));
}

Constructor Adt::operator[](std::string_view name) const {
  if (!def_) throw_error(ErrorKind::invalid_argument, "Adt: the handle is empty");
  const int tag = def_->find_constructor(name);
  if (tag < 0)
    throw_error(ErrorKind::invalid_argument, "type {} has no constructor '{}'", def_->name, name);
  return Constructor(def_, static_cast<std::uint32_t>(tag));
}

Type Adt::type(std::vector<Type> args) const { return adt_t(def_->name, std::move(args)); }

Pat Pat::bind(std::string name) {
  Pat p;
  p.kind = Kind::bind;
  p.name = std::move(name);
  return p;
}

Pat Pat::wildcard() {
  Pat p;
  p.kind = Kind::wildcard;
  return p;
}

Pat::Pat(const Constructor& c, std::vector<Pat> f)
    : kind(Kind::constructor), ctor(c), fields(std::move(f)) {
  if (fields.size() != c.arity())
    throw_error(ErrorKind::invalid_argument, "pattern {}: expected {} sub-patterns, got {}",
                c.name(), c.arity(), fields.size());
}

// --- Statements --------------------------------------------------------------------------

namespace detail {

void check_body_arity(std::size_t given, std::size_t taken, Loc loc) {
  if (given != taken)
    builder_error(loc, fmt::format("the body lambda takes {} arguments, but {} are passed to it",
                                   taken, given));
}

Expr tuple_of(std::span<const Expr> fields, Loc loc) {
  return nimble::tuple({fields.begin(), fields.end()}, loc);
}

Expr build_if(const Expr& cond, const std::function<Expr()>& then_fn,
              const std::function<Expr()>& else_fn, Loc loc) {
  Builder::State& s = state(loc);
  Expr then_body, else_body;
  {
    ScopeGuard scope(s);
    then_body = scope.close(then_fn());
  }
  {
    ScopeGuard scope(s);
    else_body = scope.close(else_fn());
  }
  return bind_statement(ir::if_then_else(cond, then_body, else_body, SourceLoc::from(loc)), "if", loc);
}

namespace {
[[noreturn]] void state_not_known(std::size_t k, const Type& type, Loc loc) {
  builder_error(loc, fmt::format("loop: the type of state {} is not known ({}); give its "
                                 "initial value a known type",
                                 k, ir::to_string(type)));
}
}  // namespace

std::vector<Expr> build_loop(const Expr* count, std::vector<Expr> init, const CondFn& cond,
                             const StateFn& body, Loc loc) {
  Builder::State& s = state(loc);
  const SourceLoc sl = SourceLoc::from(loc);
  std::vector<Type> types;
  for (const Expr& e : init) types.push_back(s.inferencer.resolve(s.inferencer.infer(e)));
  // The counter is an i64 the user never wrote: a count of another integer
  // dtype is cast to it, so that no error names a dtype they did not choose.
  Expr count_i64;
  if (count) {
    const Type t = s.inferencer.resolve(s.inferencer.infer(*count));
    const auto* tt = t.as<ir::TensorTypeNode>();
    if (!tt || tt->rank() != 0 || !is_integer(tt->dtype))
      builder_error(loc, fmt::format("foreach_: the count must be an integer scalar (i64[], i32[], ...), got {}",
                                     ir::to_string(t)));
    count_i64 = tt->dtype == DType::i64 ? *count : cast(*count, DType::i64, loc);
  }

  // Build the loop function with the current state types; if the body makes
  // a state wider (a dim that changes between iterations), widen and build
  // again. Dims only widen (towards Any), so this ends.
  for (int attempt = 0; attempt < 16; ++attempt) {
    // Annotations must not refer to unknown types: use what they resolved to.
    for (Type& t : types) t = s.inferencer.resolve(t);
    std::vector<Param> params;
    if (count) params.push_back({"i", i64({})});
    for (std::size_t k = 0; k < types.size(); ++k)
      params.push_back({init.size() == 1 ? "state" : fmt::format("s{}", k), types[k]});
    const Type ret = tuple_t(types);
    Expr loop = ir::var("loop", {}, sl);
    loop->checked_type = fn_t(types_of(params), ret);
    std::vector<Expr> vars = make_params(params, loc);
    std::span<const Expr> state_vars(vars.begin() + (count ? 1 : 0), vars.end());
    try {
      Expr fn_body;
      {
        ScopeGuard scope(s);
        Expr go_on = count ? (Located(vars[0], loc) < count_i64) : cond(state_vars);
        Expr step = build_if(
            go_on,
            [&] {
              std::vector<Expr> next = body(count ? vars[0] : Expr(), state_vars);
              if (next.size() != types.size())
                builder_error(loc, fmt::format("the loop body returned {} state values, "
                                               "expected {}",
                                               next.size(), types.size()));
              bool widened = false;
              for (std::size_t k = 0; k < next.size(); ++k) {
                const Type joined = s.inferencer.resolve(s.inferencer.join(
                    types[k], s.inferencer.infer(next[k]), next[k],
                    fmt::format("loop: state {} changes its type", k)));
                if (!(joined == types[k])) {
                  if (s.inferencer.has_incomplete(joined)) state_not_known(k, joined, loc);
                  types[k] = joined;
                  widened = true;
                }
              }
              if (widened) throw LoopStateWidened{};
              std::vector<Expr> args;
              if (count) args.push_back(Located(vars[0], loc) + scalar(1, DType::i64, loc));
              args.insert(args.end(), next.begin(), next.end());
              return bind_statement(ir::call(loop, std::move(args), {}, sl), "loop", loc);
            },
            [&] { return tuple({state_vars.begin(), state_vars.end()}, loc); }, loc);
        fn_body = scope.close(step);
      }
      for (std::size_t k = 0; k < types.size(); ++k)
        if (s.inferencer.has_incomplete(types[k])) state_not_known(k, types[k], loc);
      Expr fn = ir::function(std::move(vars), ret, fn_body, sl);
      s.inferencer.infer(fn);
      s.scopes.back().lets.emplace_back(loop, fn);
      std::vector<Expr> args;
      if (count) args.push_back(scalar(0, DType::i64, loc));
      args.insert(args.end(), init.begin(), init.end());
      Expr result = bind_statement(ir::call(loop, std::move(args), {}, sl), "loop_result", loc);
      std::vector<Expr> out;
      for (std::size_t k = 0; k < types.size(); ++k)
        out.push_back(get(result, static_cast<std::uint32_t>(k), loc));
      return out;
    } catch (const LoopStateWidened&) {
      continue;  // build again with the wider state types
    }
  }
  builder_error(loc, "loop: the state types do not reach a fixed point");
}

Expr build_closure(std::vector<Param> params, Type ret, const BodyFn& body, Loc loc) {
  Builder::State& s = state(loc);
  std::vector<Expr> vars = make_params(params, loc);
  Expr fn_body;
  {
    ScopeGuard scope(s);
    fn_body = scope.close(body(vars));
  }
  return bind_statement(ir::function(std::move(vars), std::move(ret), fn_body, SourceLoc::from(loc)), "fn",
              loc);
}

}  // namespace detail

Expr let(std::string name, Expr value, Loc loc) {
  Builder::State& s = state(loc);
  auto& lets = s.scopes.back().lets;
  // (Only when nothing else holds the old variable: a handle the user kept
  // must stay bound.)
  if (!lets.empty() && lets.back().first.same_as(value) && value->use_count() <= 2) {
    // Rename the statement that made `value` instead of adding an alias.
    Expr renamed = ir::var(std::move(name), {}, value->loc);
    renamed->checked_type = value->checked_type;
    lets.back().first = renamed;
    return renamed;
  }
  Expr v = ir::var(std::move(name), {}, SourceLoc::from(loc));
  v->checked_type = s.inferencer.infer(value);
  lets.emplace_back(v, std::move(value));
  return v;
}

Expr constant(Tensor value, Loc loc) { return ir::constant(std::move(value), SourceLoc::from(loc)); }

Expr scalar(double value, DType dtype, Loc loc) {
  Tensor t = Tensor::empty({}, dtype);
  t.fill(value);
  return constant(std::move(t), loc);
}

Expr tuple(std::vector<Expr> fields, Loc loc) {
  return bind_statement(ir::tuple(std::move(fields), SourceLoc::from(loc)), "tuple", loc);
}

Expr get(Expr t, std::uint32_t index, Loc loc) {
  return bind_statement(ir::tuple_get(std::move(t), index, SourceLoc::from(loc)), "get", loc);
}

Expr Closure::call(std::vector<Expr> args, Loc loc) const {
  const SourceLoc sl = SourceLoc::from(loc);
  return bind_statement(ir::call(value_, std::move(args), {}, sl), "call", loc);
}

Match::Match(Expr value, Loc loc) : value_(std::move(value)), loc_(loc) {}

namespace {
ir::Pattern to_ir_pattern(const Pat& p, std::vector<Expr>& bound, Loc loc) {
  switch (p.kind) {
    case Pat::Kind::wildcard: return ir::pattern_wildcard();
    case Pat::Kind::bind: {
      Expr v = ir::var(p.name, {}, SourceLoc::from(loc));
      bound.push_back(v);
      return ir::pattern_var(v);
    }
    case Pat::Kind::constructor: {
      std::vector<ir::Pattern> fields;
      for (const Pat& f : p.fields) fields.push_back(to_ir_pattern(f, bound, loc));
      return ir::pattern_constructor(p.ctor.node(loc), std::move(fields));
    }
  }
  return ir::pattern_wildcard();
}
}  // namespace

void Match::add_case(const Pat& pattern, const detail::BodyFn& body) {
  if (result_.defined()) builder_error(loc_, "match: a case was added after the match was built");
  Builder::State& s = state(loc_);
  std::vector<Expr> bound;
  ir::Pattern ir_pattern = to_ir_pattern(pattern, bound, loc_);
  s.inferencer.bind_pattern(ir_pattern, s.inferencer.infer(value_), value_);
  ScopeGuard scope(s);
  clauses_.push_back({ir_pattern, scope.close(body(bound))});
}

Expr Match::end() {
  if (!result_.defined())
    result_ = bind_statement(ir::match(value_, clauses_, SourceLoc::from(loc_)), "match", loc_);
  return result_;
}

// --- Operators and op functions -------------------------------------------------------------

namespace {
Expr with_scalar(const Located& a, double b) {
  const DType dtype = dtype_of_expr(a.expr, a.loc);
  if (!is_floating(dtype) && b != std::trunc(b))
    builder_error(a.loc, fmt::format("the number {} cannot be used with a {} tensor", b,
                                     to_string(dtype)));
  return scalar(b, dtype, a.loc);
}
}  // namespace

Expr neg(Expr x, Loc loc) { return op_call(ops::neg(), {std::move(x)}, {}, loc); }
Expr abs(Expr x, Loc loc) { return op_call(ops::abs(), {std::move(x)}, {}, loc); }
Expr exp(Expr x, Loc loc) { return op_call(ops::exp(), {std::move(x)}, {}, loc); }
Expr log(Expr x, Loc loc) { return op_call(ops::log(), {std::move(x)}, {}, loc); }
Expr log1p(Expr x, Loc loc) { return op_call(ops::log1p(), {std::move(x)}, {}, loc); }
Expr sqrt(Expr x, Loc loc) { return op_call(ops::sqrt(), {std::move(x)}, {}, loc); }
Expr rsqrt(Expr x, Loc loc) { return op_call(ops::rsqrt(), {std::move(x)}, {}, loc); }
Expr tanh(Expr x, Loc loc) { return op_call(ops::tanh(), {std::move(x)}, {}, loc); }
Expr sigmoid(Expr x, Loc loc) { return op_call(ops::sigmoid(), {std::move(x)}, {}, loc); }
Expr relu(Expr x, Loc loc) { return op_call(ops::relu(), {std::move(x)}, {}, loc); }
Expr gelu(Expr x, Loc loc) { return op_call(ops::gelu(), {std::move(x)}, {}, loc); }
Expr softplus(Expr x, Loc loc) { return op_call(ops::softplus(), {std::move(x)}, {}, loc); }
Expr erf(Expr x, Loc loc) { return op_call(ops::erf(), {std::move(x)}, {}, loc); }
Expr cast(Expr x, DType dtype, Loc loc) {
  return op_call(ops::cast(), {std::move(x)}, {{"dtype", dtype}}, loc);
}
Expr logical_not(Expr x, Loc loc) { return op_call(ops::logical_not(), {std::move(x)}, {}, loc); }
Expr add(Expr a, Expr b, Loc loc) { return op_call(ops::add(), {std::move(a), std::move(b)}, {}, loc); }
Expr sub(Expr a, Expr b, Loc loc) { return op_call(ops::sub(), {std::move(a), std::move(b)}, {}, loc); }
Expr mul(Expr a, Expr b, Loc loc) { return op_call(ops::mul(), {std::move(a), std::move(b)}, {}, loc); }
Expr div(Expr a, Expr b, Loc loc) { return op_call(ops::div(), {std::move(a), std::move(b)}, {}, loc); }
Expr maximum(Expr a, Expr b, Loc loc) {
  return op_call(ops::maximum(), {std::move(a), std::move(b)}, {}, loc);
}
Expr minimum(Expr a, Expr b, Loc loc) {
  return op_call(ops::minimum(), {std::move(a), std::move(b)}, {}, loc);
}
Expr power(Expr a, Expr b, Loc loc) {
  return op_call(ops::power(), {std::move(a), std::move(b)}, {}, loc);
}
Expr equal(Expr a, Expr b, Loc loc) {
  return op_call(ops::equal(), {std::move(a), std::move(b)}, {}, loc);
}
Expr not_equal(Expr a, Expr b, Loc loc) {
  return op_call(ops::not_equal(), {std::move(a), std::move(b)}, {}, loc);
}
Expr logical_and(Expr a, Expr b, Loc loc) {
  return op_call(ops::logical_and(), {std::move(a), std::move(b)}, {}, loc);
}
Expr logical_or(Expr a, Expr b, Loc loc) {
  return op_call(ops::logical_or(), {std::move(a), std::move(b)}, {}, loc);
}
Expr where(Expr cond, Expr x, Expr y, Loc loc) {
  return op_call(ops::where(), {std::move(cond), std::move(x), std::move(y)}, {}, loc);
}

namespace {
ir::Attrs reduce_attrs(std::vector<std::int64_t> axes, bool keepdims) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}
}  // namespace

Expr sum(Expr x, std::vector<std::int64_t> axes, bool keepdims, Loc loc) {
  return op_call(ops::sum(), {std::move(x)}, reduce_attrs(std::move(axes), keepdims), loc);
}
Expr mean(Expr x, std::vector<std::int64_t> axes, bool keepdims, Loc loc) {
  return op_call(ops::mean(), {std::move(x)}, reduce_attrs(std::move(axes), keepdims), loc);
}
Expr max(Expr x, std::vector<std::int64_t> axes, bool keepdims, Loc loc) {
  return op_call(ops::max(), {std::move(x)}, reduce_attrs(std::move(axes), keepdims), loc);
}
Expr min(Expr x, std::vector<std::int64_t> axes, bool keepdims, Loc loc) {
  return op_call(ops::min(), {std::move(x)}, reduce_attrs(std::move(axes), keepdims), loc);
}
Expr argmax(Expr x, std::int64_t axis, bool keepdims, Loc loc) {
  return op_call(ops::argmax(), {std::move(x)}, {{"axis", axis}, {"keepdims", keepdims}}, loc);
}
// argmax of an order-reversed x (one fused kernel): -x for floats (NaN stays
// NaN, so it is still picked first), -1 - x for integers, which reverses the
// order without overflow (INT_MIN becomes INT_MAX).
Expr argmin(Expr x, std::int64_t axis, bool keepdims, Loc loc) {
  const DType dtype = dtype_of_expr(x, loc);
  if (dtype == DType::boolean) return argmax(logical_not(std::move(x), loc), axis, keepdims, loc);
  Expr reversed = is_floating(dtype) ? neg(std::move(x), loc) : sub(scalar(-1, dtype, loc), std::move(x), loc);
  return argmax(std::move(reversed), axis, keepdims, loc);
}
Expr softmax(Expr x, std::int64_t axis, Loc loc) {
  return op_call(ops::softmax(), {std::move(x)}, {{"axis", axis}}, loc);
}
Expr log_softmax(Expr x, std::int64_t axis, Loc loc) {
  return op_call(ops::log_softmax(), {std::move(x)}, {{"axis", axis}}, loc);
}
Expr layer_norm(Expr x, Expr gamma, Expr beta, double epsilon, Loc loc) {
  return op_call(ops::layer_norm(), {std::move(x), std::move(gamma), std::move(beta)},
                 {{"epsilon", epsilon}}, loc);
}
Expr dense(Expr x, Expr weight, Expr bias, Loc loc) {
  return op_call(ops::dense(), {std::move(x), std::move(weight), std::move(bias)}, {}, loc);
}
// x [m, k] is a matmul with b transposed; another rank adds a bias of
// zeros [out] (one fused epilogue add), which the dense op needs.
Expr dense(Expr x, Expr weight, Loc loc) {
  Builder::State& s = state(loc);
  const Type t = s.inferencer.resolve(s.inferencer.infer(x));
  const auto* tt = t.as<ir::TensorTypeNode>();
  if (tt != nullptr && tt->rank() == 2) return matmul(std::move(x), std::move(weight), false, true, loc);
  const DType dtype = dtype_of_expr(weight, loc);
  Expr out = reshape(dim(weight, 0, loc), {1}, loc);
  return dense(std::move(x), weight, zeros(std::move(out), dtype, loc), loc);
}
Expr matmul(Expr a, Expr b, bool transpose_a, bool transpose_b, Loc loc) {
  return op_call(ops::matmul(), {std::move(a), std::move(b)},
                 {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}}, loc);
}
Expr batch_matmul(Expr a, Expr b, bool transpose_a, bool transpose_b, Loc loc) {
  return op_call(ops::batch_matmul(), {std::move(a), std::move(b)},
                 {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}}, loc);
}
Expr reshape(Expr x, std::vector<std::int64_t> newshape, Loc loc) {
  return op_call(ops::reshape(), {std::move(x)}, {{"newshape", std::move(newshape)}}, loc);
}
Expr transpose(Expr x, std::vector<std::int64_t> axes, Loc loc) {
  return op_call(ops::transpose(), {std::move(x)}, {{"axes", std::move(axes)}}, loc);
}
Expr expand_dims(Expr x, std::int64_t axis, Loc loc) {
  return op_call(ops::expand_dims(), {std::move(x)}, {{"axis", axis}}, loc);
}
Expr squeeze(Expr x, std::vector<std::int64_t> axes, Loc loc) {
  return op_call(ops::squeeze(), {std::move(x)}, {{"axes", std::move(axes)}}, loc);
}
Expr concatenate(std::vector<Expr> xs, std::int64_t axis, Loc loc) {
  Expr fields = tuple(std::move(xs), loc);
  return op_call(ops::concatenate(), {std::move(fields)}, {{"axis", axis}}, loc);
}
Expr split(Expr x, std::int64_t sections, std::int64_t axis, Loc loc) {
  return op_call(ops::split(), {std::move(x)}, {{"sections", sections}, {"axis", axis}}, loc);
}
Expr strided_slice(Expr x, std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                   Loc loc) {
  return op_call(ops::strided_slice(), {std::move(x)},
                 {{"begin", std::move(begin)}, {"end", std::move(end)}}, loc);
}
Expr take(Expr data, Expr indices, std::int64_t axis, Loc loc) {
  return op_call(ops::take(), {std::move(data), std::move(indices)}, {{"axis", axis}}, loc);
}
Expr embedding(Expr table, Expr ids, Loc loc) {
  return op_call(ops::embedding(), {std::move(table), std::move(ids)}, {}, loc);
}
Expr zeros(Expr shape, DType dtype, Loc loc) {
  return op_call(ops::zeros(), {std::move(shape)}, {{"dtype", dtype}}, loc);
}
Expr shape_of(Expr x, Loc loc) { return op_call(ops::shape_of(), {std::move(x)}, {}, loc); }
Expr nonzero(Expr x, Loc loc) { return op_call(ops::nonzero(), {std::move(x)}, {}, loc); }
Expr dim(Expr x, std::int64_t axis, Loc loc) {
  Builder::State& s = state(loc);
  const Type t = s.inferencer.resolve(s.inferencer.infer(x));
  const auto* tt = t.as<ir::TensorTypeNode>();
  if (!tt) builder_error(loc, fmt::format("dim: expected a tensor, got {}", ir::to_string(t)));
  const auto rank = static_cast<std::int64_t>(tt->rank());
  if (axis < -rank || axis >= rank)
    builder_error(loc, fmt::format("dim: axis {} is out of range for a tensor of rank {} ({})", axis, rank,
                                   ir::to_string(t)));
  return take(shape_of(std::move(x), loc), scalar(axis < 0 ? axis + rank : axis, DType::i64, loc), 0, loc);
}
Expr stack(Expr list, Loc loc) { return op_call(ops::stack(), {std::move(list)}, {}, loc); }

namespace ir {
// The operators live with Expr, so that argument-dependent lookup finds them.
Expr operator+(Located a, Expr b) { return add(a.expr, std::move(b), a.loc); }
Expr operator-(Located a, Expr b) { return sub(a.expr, std::move(b), a.loc); }
Expr operator*(Located a, Expr b) { return mul(a.expr, std::move(b), a.loc); }
Expr operator/(Located a, Expr b) { return div(a.expr, std::move(b), a.loc); }
Expr operator-(Located a) { return neg(a.expr, a.loc); }
Expr operator+(Located a, double b) { return add(a.expr, with_scalar(a, b), a.loc); }
Expr operator-(Located a, double b) { return sub(a.expr, with_scalar(a, b), a.loc); }
Expr operator*(Located a, double b) { return mul(a.expr, with_scalar(a, b), a.loc); }
Expr operator/(Located a, double b) { return div(a.expr, with_scalar(a, b), a.loc); }
Expr operator<(Located a, Expr b) { return op_call(ops::less(), {a.expr, std::move(b)}, {}, a.loc); }
Expr operator<=(Located a, Expr b) {
  return op_call(ops::less_equal(), {a.expr, std::move(b)}, {}, a.loc);
}
Expr operator>(Located a, Expr b) {
  return op_call(ops::greater(), {a.expr, std::move(b)}, {}, a.loc);
}
Expr operator>=(Located a, Expr b) {
  return op_call(ops::greater_equal(), {a.expr, std::move(b)}, {}, a.loc);
}
Expr operator+(double a, Located b) { return add(with_scalar(b, a), b.expr, b.loc); }
Expr operator-(double a, Located b) { return sub(with_scalar(b, a), b.expr, b.loc); }
Expr operator*(double a, Located b) { return mul(with_scalar(b, a), b.expr, b.loc); }
Expr operator/(double a, Located b) { return div(with_scalar(b, a), b.expr, b.loc); }
Expr operator<(Located a, double b) { return Located(a.expr, a.loc) < with_scalar(a, b); }
Expr operator<=(Located a, double b) { return Located(a.expr, a.loc) <= with_scalar(a, b); }
Expr operator>(Located a, double b) { return Located(a.expr, a.loc) > with_scalar(a, b); }
Expr operator>=(Located a, double b) { return Located(a.expr, a.loc) >= with_scalar(a, b); }
Expr operator<(double a, Located b) { return Located(with_scalar(b, a), b.loc) < b.expr; }
Expr operator<=(double a, Located b) { return Located(with_scalar(b, a), b.loc) <= b.expr; }
Expr operator>(double a, Located b) { return Located(with_scalar(b, a), b.loc) > b.expr; }
Expr operator>=(double a, Located b) { return Located(with_scalar(b, a), b.loc) >= b.expr; }

}  // namespace ir

}  // namespace nimble
