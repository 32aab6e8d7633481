// The fluent C++ builder: describe a dynamic model in plain C++.
//
//   nimble::Builder b;
//   const nimble::Dim n{"n"};
//   auto layer = b.def("layer", {{"x", f32({n, 768})}, {"w", f32({768, 768})},
//                                {"bias", f32({768})}},
//                      [&](Expr x, Expr w, Expr bias) { return relu(dense(x, w, bias)) + x; });
//   b.entry(layer);
//   ir::Module m = b.build();  // verified and type-checked: layer : fn(f32[n, 768], ...) -> f32[n, 768]
//
// Every statement binds a `let` (named after its op) in the function being
// defined, so the printed IR reads like the C++. Each statement is type-checked
// as it is built: a type error is a nimble::Error naming the op, the expected
// and actual types, and the C++ line that built it.
//
// Body lambdas take one Expr per parameter (or a std::span<const Expr>) and
// return an Expr, or a std::array<Expr, N> (a tuple). Loop bodies may run more
// than once while the loop's state types reach a fixed point, so they must
// only build IR. A Builder is used from one thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/ir/module.hpp"
#include "nimble/runtime/value.hpp"

namespace nimble {

using ir::Any;
using ir::Dim;
using ir::Expr;
using ir::Type;

// --- Types ---------------------------------------------------------------------------
[[nodiscard]] Type tensor_t(std::vector<Dim> shape, DType dtype);
[[nodiscard]] inline Type f32(std::vector<Dim> shape) { return tensor_t(std::move(shape), DType::f32); }
[[nodiscard]] inline Type f64(std::vector<Dim> shape) { return tensor_t(std::move(shape), DType::f64); }
[[nodiscard]] inline Type i32(std::vector<Dim> shape) { return tensor_t(std::move(shape), DType::i32); }
[[nodiscard]] inline Type i64(std::vector<Dim> shape) { return tensor_t(std::move(shape), DType::i64); }
[[nodiscard]] inline Type bool_t(std::vector<Dim> shape) {
  return tensor_t(std::move(shape), DType::boolean);
}
[[nodiscard]] Type tuple_t(std::vector<Type> fields);
[[nodiscard]] Type fn_t(std::vector<Type> params, Type ret);
/// An ADT type by name: adt_t("List", {f32({Any, 512})}).
[[nodiscard]] Type adt_t(std::string name, std::vector<Type> args = {});
/// A type parameter, inside an ADT definition: type_param("T").
[[nodiscard]] Type type_param(std::string name);

/// A function parameter: a name and a type.
struct Param {
  std::string name;
  Type type;
};

/// Where a builder call was made; a defaulted last argument of every builder
/// function, so that errors name the user's line.
using Loc = std::source_location;

/// An Expr that remembers where it was used; lets operators (which cannot
/// take a defaulted location argument) report the user's line.
struct Located {
  Located(Expr e, Loc l = Loc::current()) : expr(std::move(e)), loc(l) {}  // NOLINT: implicit
  Expr expr;
  Loc loc;
};

class Builder;

namespace detail {
/// The call syntax of Function and Closure: f(a, b), f({a, b}), f().
/// `Derived` provides call(std::vector<Expr>, Loc).
template <class Derived>
class CallSyntax {
 public:
  Expr operator()(std::vector<Expr> args, Loc loc = Loc::current()) const {
    return self().call(std::move(args), loc);
  }
  Expr operator()(Loc loc = Loc::current()) const { return self().call({}, loc); }
  /// f(a, b, ...): the first argument records where the call was written.
  template <class... A>
    requires(std::is_convertible_v<A, Expr> && ...)
  Expr operator()(Located first, A... rest) const {
    return self().call(std::vector<Expr>{first.expr, Expr(rest)...}, first.loc);
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};
}  // namespace detail

/// A global function of the module being built; calling it builds a call.
class Function : public detail::CallSyntax<Function> {
 public:
  Function() = default;
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Builds a call of this function (what f(...) does).
  Expr call(std::vector<Expr> args, Loc loc = Loc::current()) const;

 private:
  friend class Builder;
  explicit Function(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

/// A constructor of an ADT; calling it builds the constructed value.
class Constructor {
 public:
  Constructor() = default;
  Constructor(ir::AdtDef adt, std::uint32_t tag) : adt_(std::move(adt)), tag_(tag) {}
  [[nodiscard]] const std::string& name() const { return adt_->constructors[tag_].name; }
  [[nodiscard]] std::uint32_t tag() const noexcept { return tag_; }
  [[nodiscard]] std::size_t arity() const { return adt_->constructors[tag_].fields.size(); }
  [[nodiscard]] const ir::AdtDef& adt() const noexcept { return adt_; }
  /// The constructed value (Cons(x, xs), or Nil with no arguments).
  Expr operator()(std::vector<Expr> fields = {}, Loc loc = Loc::current()) const;
  /// A host-side value of this constructor, to pass as an input (a tree);
  /// throws Error(invalid_argument) for the wrong number of fields.
  [[nodiscard]] Value value(std::vector<Value> fields = {}) const;
  /// Whether a value (a result) was made by this constructor.
  /// (`v` must be a value of this constructor's ADT: values do not record
  /// their ADT, only the constructor's tag.)
  [[nodiscard]] bool made(const Value& v) const {
    return v.defined() && v.kind() == Value::Kind::adt && v.tag() == tag_;
  }
  /// The constructor as an IR node (for patterns and the IR API).
  [[nodiscard]] Expr node(Loc loc = Loc::current()) const;

 private:
  ir::AdtDef adt_;
  std::uint32_t tag_ = 0;
};

/// An ADT of the module being built.
class Adt {
 public:
  Adt() = default;
  explicit Adt(ir::AdtDef def) : def_(std::move(def)) {}
  /// Constructor `name`; throws Error(invalid_argument) if there is none.
  [[nodiscard]] Constructor operator[](std::string_view name) const;
  /// The ADT applied to type arguments: list.type({f32({1, 512})}).
  [[nodiscard]] Type type(std::vector<Type> args = {}) const;
  [[nodiscard]] const ir::AdtDef& def() const noexcept { return def_; }

 private:
  ir::AdtDef def_;
};

namespace detail {
template <class F>
struct CallableTraits : CallableTraits<decltype(&F::operator())> {};
template <class C, class R, class... A>
struct CallableTraits<R (C::*)(A...) const> {
  static constexpr std::size_t arity = sizeof...(A);
};
template <class C, class R, class... A>
struct CallableTraits<R (C::*)(A...)> {
  static constexpr std::size_t arity = sizeof...(A);
};

Expr tuple_of(std::span<const Expr> fields, Loc loc);
void check_body_arity(std::size_t given, std::size_t taken, Loc loc);
inline Expr to_expr(Expr e, Loc) { return e; }
template <std::size_t N>
Expr to_expr(const std::array<Expr, N>& fields, Loc loc) {
  return tuple_of(fields, loc);
}

/// Calls `body` with the Exprs in `args`: as a span when it takes one, else
/// one argument per Expr (the count must match).
template <class F>
Expr invoke_body(F& body, std::span<const Expr> args, Loc loc) {
  if constexpr (std::is_invocable_v<F&, std::span<const Expr>>) {
    return to_expr(body(args), loc);
  } else {
    constexpr std::size_t n = CallableTraits<std::remove_cvref_t<F>>::arity;
    check_body_arity(args.size(), n, loc);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return to_expr(body(args[I]...), loc);
    }(std::make_index_sequence<n>{});
  }
}

using BodyFn = std::function<Expr(std::span<const Expr>)>;
using StateFn = std::function<std::vector<Expr>(Expr index, std::span<const Expr> state)>;
using CondFn = std::function<Expr(std::span<const Expr> state)>;

Expr build_if(const Expr& cond, const std::function<Expr()>& then_fn,
              const std::function<Expr()>& else_fn, Loc loc);
std::vector<Expr> build_loop(const Expr* count, std::vector<Expr> init, const CondFn& cond,
                             const StateFn& body, Loc loc);
Expr build_closure(std::vector<Param> params, Type ret, const BodyFn& body, Loc loc);
}  // namespace detail

/// Builds a module: ADTs, global functions (recursive ones declared first),
/// entry points.
class Builder {
 public:
  Builder();
  ~Builder();
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  /// Defines an ADT. Field types may use type_param("T") for the ADT's
  /// parameters and adt_t(name, ...) for itself (recursion).
  Adt adt(std::string name, std::vector<std::string> type_params,
          std::vector<std::pair<std::string, std::vector<Type>>> constructors);
  /// The standard List<T> { Nil, Cons(T, List<T>) }, defined on first use.
  Adt list();
  /// The standard Option<T> { None, Some(T) }, defined on first use.
  Adt option();

  /// Declares a global function so that it can be called before (or while)
  /// it is defined: recursion and mutual recursion need declared signatures.
  Function declare(std::string name, std::vector<Param> params, Type ret,
                   Loc loc = Loc::current());
  /// Defines a declared function's body.
  template <class Body>
  void define(const Function& fn, Body&& body, Loc loc = Loc::current()) {
    define_impl(fn, detail::BodyFn([&body, loc](std::span<const Expr> args) {
                  return detail::invoke_body(body, args, loc);
                }),
                loc);
  }
  /// Declares and defines a function. `ret` may be left out (undefined) for a
  /// non-recursive function: it is then inferred.
  template <class Body>
  Function def(std::string name, std::vector<Param> params, Type ret, Body&& body,
               Loc loc = Loc::current()) {
    Function fn = declare_impl(std::move(name), std::move(params), std::move(ret), loc);
    define(fn, std::forward<Body>(body), loc);
    return fn;
  }
  template <class Body>
    requires(!std::is_convertible_v<Body, Type>)
  Function def(std::string name, std::vector<Param> params, Body&& body,
               Loc loc = Loc::current()) {
    return def(std::move(name), std::move(params), Type(), std::forward<Body>(body), loc);
  }
  /// Marks `fn` as an entry point (callable from the host).
  void entry(const Function& fn);

  /// The module so far (not yet verified as a whole).
  [[nodiscard]] const ir::Module& module() const;
  /// Verifies the module and infers all types; returns it. Throws
  /// Error(invalid_argument) for an ill-formed module (e.g. a declared
  /// function never defined) and Error(type_error) for an ill-typed one.
  [[nodiscard]] ir::Module build();

  struct State;

 private:
  Function declare_impl(std::string name, std::vector<Param> params, Type ret, Loc loc);
  void define_impl(const Function& fn, const detail::BodyFn& body, Loc loc);
  std::unique_ptr<State> state_;
};

// --- Statements (inside a body) ---------------------------------------------------------

/// Names the value of the latest statement: `auto h = let("h", sigmoid(x))`
/// prints as `let %h = sigmoid(%x)`.
Expr let(std::string name, Expr value, Loc loc = Loc::current());
/// A constant tensor.
Expr constant(Tensor value, Loc loc = Loc::current());
/// A scalar constant: scalar(1.0, DType::f32), scalar(0, DType::i64).
Expr scalar(double value, DType dtype, Loc loc = Loc::current());

/// A tuple, a field of a tuple, and all N fields of a tuple (for structured
/// bindings: `auto [h, c] = unpack<2>(state)`).
Expr tuple(std::vector<Expr> fields, Loc loc = Loc::current());
Expr get(Expr tuple, std::uint32_t index, Loc loc = Loc::current());
template <std::size_t N>
std::array<Expr, N> unpack(Expr t, Loc loc = Loc::current()) {
  std::array<Expr, N> out;
  for (std::size_t i = 0; i < N; ++i) out[i] = get(t, static_cast<std::uint32_t>(i), loc);
  return out;
}

/// if (cond) then_fn() else else_fn(); both lambdas take no argument.
template <class Then, class Else>
Expr if_(Expr cond, Then&& then_fn, Else&& else_fn, Loc loc = Loc::current()) {
  return detail::build_if(
      cond, [&] { return detail::to_expr(then_fn(), loc); },
      [&] { return detail::to_expr(else_fn(), loc); }, loc);
}

/// for i in [0, count): state = body(i, state); returns the final state.
/// `count` is an integer scalar (i64[], i32[], i8[]); body takes (Expr i, std::array<Expr, N> state)
/// and returns the new std::array<Expr, N>. Lowers to a tail-recursive local
/// function; state types that change between iterations are joined (dims
/// that differ become Any).
template <std::size_t N, class Body>
std::array<Expr, N> foreach_(Expr count, std::array<Expr, N> init, Body&& body,
                             Loc loc = Loc::current()) {
  std::vector<Expr> out = detail::build_loop(
      &count, {init.begin(), init.end()}, {},
      [&](Expr i, std::span<const Expr> state) {
        std::array<Expr, N> s;
        for (std::size_t k = 0; k < N; ++k) s[k] = state[k];
        std::array<Expr, N> next = body(i, s);
        return std::vector<Expr>(next.begin(), next.end());
      },
      loc);
  std::array<Expr, N> result;
  for (std::size_t k = 0; k < N; ++k) result[k] = out[k];
  return result;
}

/// while cond(state): state = body(state); returns the final state. cond
/// returns a bool[] scalar.
template <std::size_t N, class Cond, class Body>
std::array<Expr, N> while_loop(std::array<Expr, N> init, Cond&& cond, Body&& body,
                               Loc loc = Loc::current()) {
  auto to_array = [](std::span<const Expr> state) {
    std::array<Expr, N> s;
    for (std::size_t k = 0; k < N; ++k) s[k] = state[k];
    return s;
  };
  std::vector<Expr> out = detail::build_loop(
      nullptr, {init.begin(), init.end()},
      [&](std::span<const Expr> state) { return cond(to_array(state)); },
      [&](Expr, std::span<const Expr> state) {
        std::array<Expr, N> next = body(to_array(state));
        return std::vector<Expr>(next.begin(), next.end());
      },
      loc);
  return to_array(out);
}

/// A closure value: a local function that captures the variables it uses.
/// Calling it builds a call; it converts to the Expr of the function value
/// (to pass it on, or return it).
class Closure : public detail::CallSyntax<Closure> {
 public:
  /// Wraps a function-typed value (a closure received as an argument).
  explicit Closure(Expr value) : value_(std::move(value)) {}
  operator Expr() const { return value_; }  // NOLINT: implicit, closures are values
  /// Builds a call of this closure (what f(...) does).
  Expr call(std::vector<Expr> args, Loc loc = Loc::current()) const;

 private:
  Expr value_;
};

/// Builds a closure with the given parameters and (optional) return type.
template <class Body>
Closure closure(std::vector<Param> params, Type ret, Body&& body, Loc loc = Loc::current()) {
  return Closure(detail::build_closure(std::move(params), std::move(ret),
                                       [&body, loc](std::span<const Expr> args) {
                                         return detail::invoke_body(body, args, loc);
                                       },
                                       loc));
}

/// A pattern for match: a constructor with sub-patterns, a binding, or a wildcard.
class Pat {
 public:
  /// Binds the matched value; it is passed to the case's lambda.
  [[nodiscard]] static Pat bind(std::string name = "v");
  [[nodiscard]] static Pat wildcard();
  /// Constructor `c` with one sub-pattern per field.
  Pat(const Constructor& c, std::vector<Pat> fields);

  enum class Kind { bind, wildcard, constructor };
  Kind kind;
  std::string name;
  Constructor ctor;
  std::vector<Pat> fields;

 private:
  Pat() = default;
};

/// match (value) { case ... }: add cases in order, then convert to Expr (or
/// call end()). A case's lambda takes one Expr per variable its pattern binds;
/// case_(ctor, f) binds every field of `ctor`.
class Match {
 public:
  explicit Match(Expr value, Loc loc = Loc::current());
  template <class F>
  Match& case_(const Constructor& c, F&& body) {
    std::vector<Pat> fields;
    for (std::size_t i = 0; i < c.arity(); ++i) fields.push_back(Pat::bind());
    return case_(Pat(c, std::move(fields)), std::forward<F>(body));
  }
  template <class F>
  Match& case_(const Pat& pattern, F&& body) {
    add_case(pattern, [&body, this](std::span<const Expr> bound) {
      return detail::invoke_body(body, bound, loc_);
    });
    return *this;
  }
  /// The wildcard case.
  template <class F>
  Match& otherwise(F&& body) {
    return case_(Pat::wildcard(), [&body](std::span<const Expr>) { return body(); });
  }
  Expr end();
  operator Expr() { return end(); }  // NOLINT: implicit, so that `Expr r = Match(...)...`

 private:
  void add_case(const Pat& pattern, const detail::BodyFn& body);
  Expr value_;
  Loc loc_;
  std::vector<ir::Clause> clauses_;
  Expr result_;
};

// --- Operators -------------------------------------------------------------------------
namespace ir {
// Declared with Expr so that argument-dependent lookup finds them without a
// using-directive.
Expr operator+(Located a, Expr b);
Expr operator-(Located a, Expr b);
Expr operator*(Located a, Expr b);
Expr operator/(Located a, Expr b);
Expr operator-(Located a);
/// With a number on either side: the number becomes a scalar of the
/// tensor's dtype (an Error if it has a fraction and the dtype is an
/// integer one): 1.0 - z, x * 0.5, v > 0.
Expr operator+(Located a, double b);
Expr operator-(Located a, double b);
Expr operator*(Located a, double b);
Expr operator/(Located a, double b);
Expr operator+(double a, Located b);
Expr operator-(double a, Located b);
Expr operator*(double a, Located b);
Expr operator/(double a, Located b);
/// Comparisons give bool tensors (broadcast as arithmetic is).
Expr operator<(Located a, Expr b);
Expr operator<=(Located a, Expr b);
Expr operator>(Located a, Expr b);
Expr operator>=(Located a, Expr b);
Expr operator<(Located a, double b);
Expr operator<=(Located a, double b);
Expr operator>(Located a, double b);
Expr operator>=(Located a, double b);
Expr operator<(double a, Located b);
Expr operator<=(double a, Located b);
Expr operator>(double a, Located b);
Expr operator>=(double a, Located b);
}  // namespace ir

// Elementwise.
Expr neg(Expr x, Loc loc = Loc::current());
Expr abs(Expr x, Loc loc = Loc::current());
Expr exp(Expr x, Loc loc = Loc::current());
Expr log(Expr x, Loc loc = Loc::current());
/// log(1 + x), accurate where x is tiny (log(1 + x) would round 1 + x first).
Expr log1p(Expr x, Loc loc = Loc::current());
Expr sqrt(Expr x, Loc loc = Loc::current());
Expr rsqrt(Expr x, Loc loc = Loc::current());
Expr tanh(Expr x, Loc loc = Loc::current());
Expr sigmoid(Expr x, Loc loc = Loc::current());
Expr relu(Expr x, Loc loc = Loc::current());
Expr gelu(Expr x, Loc loc = Loc::current());
/// log(1 + exp(x)), computed without overflow.
Expr softplus(Expr x, Loc loc = Loc::current());
Expr erf(Expr x, Loc loc = Loc::current());
Expr cast(Expr x, DType dtype, Loc loc = Loc::current());
Expr logical_not(Expr x, Loc loc = Loc::current());
Expr add(Expr a, Expr b, Loc loc = Loc::current());
Expr sub(Expr a, Expr b, Loc loc = Loc::current());
Expr mul(Expr a, Expr b, Loc loc = Loc::current());
Expr div(Expr a, Expr b, Loc loc = Loc::current());
Expr maximum(Expr a, Expr b, Loc loc = Loc::current());
Expr minimum(Expr a, Expr b, Loc loc = Loc::current());
Expr power(Expr a, Expr b, Loc loc = Loc::current());
Expr equal(Expr a, Expr b, Loc loc = Loc::current());
Expr not_equal(Expr a, Expr b, Loc loc = Loc::current());
Expr logical_and(Expr a, Expr b, Loc loc = Loc::current());
Expr logical_or(Expr a, Expr b, Loc loc = Loc::current());
Expr where(Expr cond, Expr x, Expr y, Loc loc = Loc::current());

// Reductions (axes empty = all axes).
Expr sum(Expr x, std::vector<std::int64_t> axes, bool keepdims = false, Loc loc = Loc::current());
Expr mean(Expr x, std::vector<std::int64_t> axes, bool keepdims = false, Loc loc = Loc::current());
Expr max(Expr x, std::vector<std::int64_t> axes, bool keepdims = false, Loc loc = Loc::current());
Expr min(Expr x, std::vector<std::int64_t> axes, bool keepdims = false, Loc loc = Loc::current());
/// The first index of the maximum (NaN counts as maximal) along `axis`: i64.
Expr argmax(Expr x, std::int64_t axis, bool keepdims = false, Loc loc = Loc::current());
/// The first index of the minimum (NaN counts as minimal) along `axis`: i64.
Expr argmin(Expr x, std::int64_t axis, bool keepdims = false, Loc loc = Loc::current());
Expr softmax(Expr x, std::int64_t axis = -1, Loc loc = Loc::current());
Expr log_softmax(Expr x, std::int64_t axis = -1, Loc loc = Loc::current());
Expr layer_norm(Expr x, Expr gamma, Expr beta, double epsilon = 1e-5, Loc loc = Loc::current());

// Linear algebra.
/// x·weightᵀ + bias, weight stored [out, in] (PyTorch Linear).
Expr dense(Expr x, Expr weight, Expr bias, Loc loc = Loc::current());
/// x·weightᵀ, without a bias (Linear(bias=False)).
Expr dense(Expr x, Expr weight, Loc loc = Loc::current());
Expr matmul(Expr a, Expr b, bool transpose_a = false, bool transpose_b = false,
            Loc loc = Loc::current());
Expr batch_matmul(Expr a, Expr b, bool transpose_a = false, bool transpose_b = false,
                  Loc loc = Loc::current());

// Shapes and data movement.
Expr reshape(Expr x, std::vector<std::int64_t> newshape, Loc loc = Loc::current());
Expr transpose(Expr x, std::vector<std::int64_t> axes, Loc loc = Loc::current());
Expr expand_dims(Expr x, std::int64_t axis, Loc loc = Loc::current());
Expr squeeze(Expr x, std::vector<std::int64_t> axes, Loc loc = Loc::current());
Expr concatenate(std::vector<Expr> xs, std::int64_t axis, Loc loc = Loc::current());
/// Splits into `sections` equal parts along `axis`: a tuple.
Expr split(Expr x, std::int64_t sections, std::int64_t axis, Loc loc = Loc::current());
template <std::size_t N>
std::array<Expr, N> split(Expr x, std::int64_t axis, Loc loc = Loc::current()) {
  return unpack<N>(split(std::move(x), static_cast<std::int64_t>(N), axis, loc), loc);
}
Expr strided_slice(Expr x, std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                   Loc loc = Loc::current());
/// Elements of `data` at `indices` along `axis` (a scalar index drops the axis).
Expr take(Expr data, Expr indices, std::int64_t axis = 0, Loc loc = Loc::current());
Expr embedding(Expr table, Expr ids, Loc loc = Loc::current());

// Creation and shapes.
Expr zeros(Expr shape, DType dtype, Loc loc = Loc::current());
Expr shape_of(Expr x, Loc loc = Loc::current());
/// The indices of x's elements that are not 0 (NaN counts as not 0), in
/// row-major order: i64[count, rank of x], count known only at run time.
Expr nonzero(Expr x, Loc loc = Loc::current());
/// Dim `axis` of x (negative: from the end) at run time: an i64[] scalar.
Expr dim(Expr x, std::int64_t axis, Loc loc = Loc::current());
/// Stacks the tensors of a List along a new leading axis.
Expr stack(Expr list, Loc loc = Loc::current());

}  // namespace nimble
