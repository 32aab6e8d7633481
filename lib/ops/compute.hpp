// Compute rules: a small tensor-expression language in the spirit of TVM's
// `te` / TOPI, in which every op with a loop-nest semantics states how each
// output element is computed. The code generators lower compute rules into
// loop nests (fusion inlines injective producers into their consumers); the
// naive evaluator (compute_eval.hpp) is the rules' oracle and constant folder.
//
// Nodes are small immutable values with a kind tag, shared by reference
// (copying an Expr or a Tensor copies a handle); dispatch on kind() with
// as<T>(). Vars compare by identity: two Vars with one name are different.
// Constructors check their operands' dtypes with assertions: a rule that
// builds an ill-typed expression is a bug, not a user error.
//
// Semantics (what the evaluator does and generated code must match):
//  - Every Expr has a DType. Index math (shapes, loop axes, load indices) is
//    i64. Integer and bool arithmetic is exact modulo 2^bits of its dtype
//    (two's complement wrap-around, as PyTorch); bool is 0 or 1.
//  - Floating-point expressions denote their value computed in double; a
//    value is rounded to its dtype when it is stored into a tensor and at a
//    cast (f16/bf16 through f32, as the reference kernels do). Generated code
//    may compute in the dtype (or an accumulator dtype) within the tolerance
//    policy of DESIGN.md: a few ulps elementwise, Σ|x|·n·ε for reductions.
//  - select(c, a, b) evaluates only the operand it picks (C's ?:), so a branch
//    may hold a load that is only in bounds when it is picked; generated code
//    may evaluate both (a blend) only where that cannot fault.
//  - An unchecked load promises its indices are in bounds and an unchecked
//    integer division promises a non-zero divisor without overflow: the rule
//    guarantees them (by its shapes and checks). A *checked* load or division
//    tests the condition per element, and a failure raises nimble::Error
//    (runtime_error) through the kernel's error flag: never a trap, never an
//    out-of-bounds read.
//  - A compute Tensor may carry Checks: conditions on the shape Vars and on
//    scalar loads from its inputs (never on its own axes) that must hold
//    before any element is computed; a failure is nimble::Error(kind,
//    "<tensor>: <message>"). They restate at run time what the type relation
//    left open (a dim that may be 1, equal reduction dims, an offset in range).
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/error.hpp"
#include "nimble/ir/type.hpp"
#include "nimble/runtime/dtype.hpp"
#include "nimble/support/ref_counted.hpp"

namespace nimble::te {

enum class ExprKind : std::uint8_t {
  int_imm,    ///< an integer or bool constant
  float_imm,  ///< a floating-point constant
  var,        ///< an i64 variable: a dynamic dim or a loop axis
  unary,
  binary,
  select,  ///< select(cond, a, b): lazy, as C's ?:
  cast,
  load,    ///< tensor[indices]
  reduce,  ///< a fold over reduction axes; only as the whole body of a compute
};

/// The unary primitives, listed with their operands, cost and value in
/// unary_ops.def.
enum class UnaryOp : std::uint8_t {
#define NIMBLE_UNARY(name, operands, cost, value) name,
#include "ops/unary_ops.def"
#undef NIMBLE_UNARY
};

/// The operands a unary primitive takes (unary_ops.def).
enum class UnaryOperands : std::uint8_t { numeric, floating, boolean };
[[nodiscard]] UnaryOperands operands_of(UnaryOp op) noexcept;
/// About how many instructions one element of `op` costs once emitted.
[[nodiscard]] int cost_of(UnaryOp op) noexcept;

enum class BinaryOp : std::uint8_t {
  add,
  sub,
  mul,
  div,       ///< IEEE for floating point; integers truncate toward zero
  floordiv,  ///< integers only: rounds toward -inf (index math)
  floormod,  ///< integers only: the sign of the divisor (index math)
  rem,       ///< integers: the sign of the dividend (C's %); floating point: fmod
  maximum,   ///< a NaN operand gives NaN (as PyTorch)
  minimum,   ///< a NaN operand gives NaN (as PyTorch)
  pow,       ///< std::pow for floating point; integers exact with wrap-around, x^0 = 1
  eq,        ///< comparisons give bool; IEEE: false with a NaN except ne
  ne,
  lt,
  le,
  gt,
  ge,
  logical_and,  ///< bool operands, both evaluated (select is the guard that skips one)
  logical_or,
};

/// How a reduce folds its source over its axes.
enum class ReduceKind : std::uint8_t {
  sum,     ///< init + Σ source
  max,     ///< NaN-propagating: a NaN source element gives NaN
  min,     ///< NaN-propagating
  argmax,  ///< the value (i64) of its single axis at the first maximum; the
           ///< first NaN counts as the maximum (as PyTorch)
};

[[nodiscard]] std::string_view to_string(UnaryOp op) noexcept;
[[nodiscard]] std::string_view to_string(BinaryOp op) noexcept;
[[nodiscard]] std::string_view to_string(ReduceKind kind) noexcept;

class ExprNode : public RefCounted {
 public:
  const ExprKind kind;
  const DType dtype;
  virtual ~ExprNode() = default;

 protected:
  ExprNode(ExprKind k, DType d) : kind(k), dtype(d) {}
};

/// A handle to an immutable expression node; null when default-constructed.
/// An integer converts implicitly to an i64 constant (index math).
class Expr {
 public:
  Expr() = default;
  explicit Expr(Ref<const ExprNode> node) : node_(std::move(node)) {}
  template <class I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
      Expr(I value)  // NOLINT: implicit, so that shapes read {n, 3}
      : Expr(from_i64(static_cast<std::int64_t>(value))) {}

  [[nodiscard]] bool defined() const noexcept { return static_cast<bool>(node_); }
  [[nodiscard]] ExprKind kind() const noexcept { return node_->kind; }
  [[nodiscard]] DType dtype() const noexcept { return node_->dtype; }
  [[nodiscard]] const ExprNode* get() const noexcept { return node_.get(); }
  template <class T>
  [[nodiscard]] const T* as() const noexcept {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  /// Identity: the same node.
  [[nodiscard]] bool same_as(const Expr& other) const noexcept { return node_ == other.node_; }

 private:
  static Expr from_i64(std::int64_t value);
  Ref<const ExprNode> node_;
};

class VarNode;

/// An i64 variable, compared by identity.
class Var : public Expr {
 public:
  explicit Var(std::string name);
  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] const VarNode* node() const noexcept;
};

/// A loop axis: `var` ranges over [0, extent).
struct IterVar {
  Var var;
  Expr extent;
};

/// A condition a compute Tensor requires before computing (see the header).
struct Check {
  Expr condition;  ///< bool, over shape Vars and scalar loads from inputs
  ErrorKind kind = ErrorKind::invalid_argument;
  std::string message;  ///< without the tensor name, e.g. "a and b do not broadcast at dim 0"
};

/// Appends a Check unless `condition` is the constant true (a constant false
/// stays: it fails at run time, as the reference kernel would).
void add_check(std::vector<Check>& checks, Expr condition, ErrorKind kind, std::string message);

class TensorNode;

/// A handle to a placeholder (an input of the rule) or a compute stage.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Ref<const TensorNode> node) : node_(std::move(node)) {}

  [[nodiscard]] bool defined() const noexcept { return static_cast<bool>(node_); }
  [[nodiscard]] const TensorNode* get() const noexcept { return node_.get(); }
  const TensorNode* operator->() const noexcept { return node_.get(); }
  [[nodiscard]] bool same_as(const Tensor& other) const noexcept { return node_ == other.node_; }

  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] DType dtype() const noexcept;
  [[nodiscard]] const std::vector<Expr>& shape() const noexcept;
  [[nodiscard]] std::size_t ndim() const noexcept { return shape().size(); }
  [[nodiscard]] bool is_placeholder() const noexcept;

  /// An (unchecked) load of the element at `indices`.
  [[nodiscard]] Expr operator()(std::vector<Expr> indices) const;

 private:
  Ref<const TensorNode> node_;
};

class TensorNode final : public RefCounted {
 public:
  enum class Kind : std::uint8_t { placeholder, compute };

  TensorNode(Kind k, std::string n, DType d, std::vector<Expr> s, std::vector<Var> a, Expr b,
             std::vector<Check> c)
      : kind(k),
        name(std::move(n)),
        dtype(d),
        shape(std::move(s)),
        axes(std::move(a)),
        body(std::move(b)),
        checks(std::move(c)) {}

  const Kind kind;
  const std::string name;
  const DType dtype;
  const std::vector<Expr> shape;  ///< i64 extents
  // Compute stages only:
  const std::vector<Var> axes;  ///< one per dim: axes[d] ranges over [0, shape[d])
  const Expr body;              ///< the element at `axes`, of dtype `dtype`
  const std::vector<Check> checks;
};

// --- Nodes -----------------------------------------------------------------------

class IntImmNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::int_imm;
  IntImmNode(std::int64_t v, DType d) : ExprNode(kKind, d), value(v) {}
  const std::int64_t value;  ///< already wrapped to the dtype
};

class FloatImmNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::float_imm;
  FloatImmNode(double v, DType d) : ExprNode(kKind, d), value(v) {}
  const double value;  ///< as given: not rounded to the dtype (see the semantics)
};

class VarNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::var;
  explicit VarNode(std::string n) : ExprNode(kKind, DType::i64), name(std::move(n)) {}
  const std::string name;
};

class UnaryNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::unary;
  UnaryNode(UnaryOp o, Expr x) : ExprNode(kKind, x.dtype()), op(o), a(std::move(x)) {}
  const UnaryOp op;
  const Expr a;
};

class BinaryNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::binary;
  BinaryNode(BinaryOp o, Expr x, Expr y, bool c, DType d)
      : ExprNode(kKind, d), op(o), a(std::move(x)), b(std::move(y)), checked(c) {}
  const BinaryOp op;
  const Expr a;
  const Expr b;
  /// Integer div, floordiv, floormod, rem and pow only: raise an error for a
  /// zero divisor, INT_MIN / -1 (div, floordiv) or a negative exponent.
  const bool checked;
};

class SelectNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::select;
  SelectNode(Expr c, Expr x, Expr y)
      : ExprNode(kKind, x.dtype()), cond(std::move(c)), a(std::move(x)), b(std::move(y)) {}
  const Expr cond;
  const Expr a;  ///< when cond
  const Expr b;  ///< otherwise
};

/// A conversion as the cast op states it (elementwise.cpp): floating to
/// integer truncates toward zero and saturates (NaN -> 0); integer to integer
/// wraps; anything to bool is != 0 (NaN is true); floating rounds to nearest.
class CastNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::cast;
  CastNode(DType to, Expr x) : ExprNode(kKind, to), value(std::move(x)) {}
  const Expr value;
};

class LoadNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::load;
  LoadNode(Tensor t, std::vector<Expr> i, bool c)
      : ExprNode(kKind, t.dtype()), tensor(std::move(t)), indices(std::move(i)), checked(c) {}
  const Tensor tensor;
  const std::vector<Expr> indices;  ///< i64, one per dim of `tensor`
  /// The indices are computed from data (take, embedding): each must be
  /// checked to lie in [0, extent) before the read.
  const bool checked;
};

class ReduceNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::reduce;
  ReduceNode(ReduceKind k, Expr s, std::vector<IterVar> a, Expr i, DType d)
      : ExprNode(kKind, d),
        reduce_kind(k),
        source(std::move(s)),
        axes(std::move(a)),
        init(std::move(i)) {}
  const ReduceKind reduce_kind;
  const Expr source;  ///< evaluated at every point of the axes, in row-major order
  /// No axes fold the single point (the result is `source` folded into init).
  const std::vector<IterVar> axes;
  const Expr init;  ///< the starting value, of the source's dtype
};

// --- Construction -------------------------------------------------------------------

/// `value` as a constant of `dtype`: whole for integer dtypes (wrapped), 0/1 for bool.
[[nodiscard]] Expr constant(DType dtype, double value);
/// An integer constant of integer (or bool) dtype, wrapped to it.
[[nodiscard]] Expr int_imm(std::int64_t value, DType dtype = DType::i64);
/// The constant if `e` is an integer/bool constant, else nullopt.
[[nodiscard]] std::optional<std::int64_t> as_int(const Expr& e) noexcept;
/// The lowest (-inf for floating point) and highest values of `dtype`.
[[nodiscard]] Expr lowest(DType dtype);
[[nodiscard]] Expr highest(DType dtype);

[[nodiscard]] Expr unary(UnaryOp op, Expr a);
/// Folds constants and identities (x + 0, x * 1, select on a constant, ...)
/// where that cannot drop a check or change a value.
[[nodiscard]] Expr binary(BinaryOp op, Expr a, Expr b, bool checked = false);
[[nodiscard]] Expr select(Expr cond, Expr a, Expr b);
[[nodiscard]] Expr cast(DType dtype, Expr value);
[[nodiscard]] Expr load(const Tensor& tensor, std::vector<Expr> indices);
/// A load whose indices come from data and are checked (see LoadNode).
[[nodiscard]] Expr checked_load(const Tensor& tensor, std::vector<Expr> indices);

/// A reduction axis over [0, extent).
[[nodiscard]] IterVar reduce_axis(Expr extent, std::string name);
/// Reductions; `init` defaults to 0, lowest, highest, and lowest for argmax.
[[nodiscard]] Expr reduce(ReduceKind kind, Expr source, std::vector<IterVar> axes, Expr init);
[[nodiscard]] Expr reduce_sum(Expr source, std::vector<IterVar> axes);
[[nodiscard]] Expr reduce_max(Expr source, std::vector<IterVar> axes);
[[nodiscard]] Expr reduce_min(Expr source, std::vector<IterVar> axes);
[[nodiscard]] Expr reduce_argmax(Expr source, IterVar axis);

// Unary functions: te::exp(x) and so on, one per line of unary_ops.def.
#define NIMBLE_UNARY(name, operands, cost, value) \
  [[nodiscard]] inline Expr name(Expr a) { return unary(UnaryOp::name, std::move(a)); }
#include "ops/unary_ops.def"
#undef NIMBLE_UNARY

// Binary functions (operators below for the common ones).
[[nodiscard]] inline Expr floordiv(Expr a, Expr b) {
  return binary(BinaryOp::floordiv, std::move(a), std::move(b));
}
[[nodiscard]] inline Expr floormod(Expr a, Expr b) {
  return binary(BinaryOp::floormod, std::move(a), std::move(b));
}
[[nodiscard]] inline Expr maximum(Expr a, Expr b) {
  return binary(BinaryOp::maximum, std::move(a), std::move(b));
}
[[nodiscard]] inline Expr minimum(Expr a, Expr b) {
  return binary(BinaryOp::minimum, std::move(a), std::move(b));
}
[[nodiscard]] inline Expr pow(Expr a, Expr b) {
  return binary(BinaryOp::pow, std::move(a), std::move(b));
}
[[nodiscard]] inline Expr eq(Expr a, Expr b) {
  return binary(BinaryOp::eq, std::move(a), std::move(b));
}
[[nodiscard]] inline Expr ne(Expr a, Expr b) {
  return binary(BinaryOp::ne, std::move(a), std::move(b));
}
/// min(max(x, lo), hi) on integers.
[[nodiscard]] inline Expr clamp(Expr x, Expr lo, Expr hi) {
  return minimum(maximum(std::move(x), std::move(lo)), std::move(hi));
}

// Operators; a C++ number next to an Expr becomes a constant of the Expr's dtype.
[[nodiscard]] inline Expr operator-(Expr a) {
  return neg(std::move(a));
}
[[nodiscard]] inline Expr operator!(Expr a) {
  return logical_not(std::move(a));
}

template <class N>
concept Number = std::is_arithmetic_v<N> && !std::is_same_v<N, bool>;

/// `value` as a constant of `dtype` (integers stay exact for integer dtypes).
template <Number N>
[[nodiscard]] Expr constant_of(DType dtype, N value) {
  if constexpr (std::is_integral_v<N>)
    if (!is_floating(dtype)) return int_imm(static_cast<std::int64_t>(value), dtype);
  return constant(dtype, static_cast<double>(value));
}

/// Operands of a binary operator: Exprs (or Vars), or one Expr and a number.
template <class A, class B>
concept Operands = (std::derived_from<A, Expr> && std::derived_from<B, Expr>) ||
                   (std::derived_from<A, Expr> && Number<B>) ||
                   (Number<A> && std::derived_from<B, Expr>);

template <class A, class B>
requires Operands<A, B>
[[nodiscard]] Expr apply_binary(BinaryOp op, const A& a, const B& b) {
  if constexpr (Number<A>)
    return binary(op, constant_of(b.dtype(), a), b);
  else if constexpr (Number<B>)
    return binary(op, a, constant_of(a.dtype(), b));
  else
    return binary(op, a, b);
}

// clang-format off
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator+(const A& a, const B& b) { return apply_binary(BinaryOp::add, a, b); }
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator-(const A& a, const B& b) { return apply_binary(BinaryOp::sub, a, b); }
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator*(const A& a, const B& b) { return apply_binary(BinaryOp::mul, a, b); }
/// Truncating for integers (C's /); index math uses floordiv.
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator/(const A& a, const B& b) { return apply_binary(BinaryOp::div, a, b); }
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator%(const A& a, const B& b) { return apply_binary(BinaryOp::rem, a, b); }
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator<(const A& a, const B& b) { return apply_binary(BinaryOp::lt, a, b); }
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator<=(const A& a, const B& b) { return apply_binary(BinaryOp::le, a, b); }
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator>(const A& a, const B& b) { return apply_binary(BinaryOp::gt, a, b); }
template <class A, class B> requires Operands<A, B>
[[nodiscard]] Expr operator>=(const A& a, const B& b) { return apply_binary(BinaryOp::ge, a, b); }
// clang-format on
[[nodiscard]] inline Expr operator&&(Expr a, Expr b) {
  return binary(BinaryOp::logical_and, std::move(a), std::move(b));
}
[[nodiscard]] inline Expr operator||(Expr a, Expr b) {
  return binary(BinaryOp::logical_or, std::move(a), std::move(b));
}

// --- Tensors --------------------------------------------------------------------------

[[nodiscard]] Tensor placeholder(std::string name, DType dtype, std::vector<Expr> shape);

/// A compute stage from its parts; the body must not hold a reduce except as
/// its whole (codegen lowers a reduce stage to init and update loops).
[[nodiscard]] Tensor make_compute(std::string name, std::vector<Expr> shape, std::vector<Var> axes,
                                  Expr body, std::vector<Check> checks = {});

/// `count` fresh Vars named <prefix>0, <prefix>1, ...
[[nodiscard]] std::vector<Var> make_axes(std::size_t count, std::string_view prefix);

/// A compute stage whose element at index `i` (one Var per dim, named i0,
/// i1, ...) is `fn(i)`; its dtype is the body's.
template <class Fn>
[[nodiscard]] Tensor compute(std::vector<Expr> shape, std::string name, Fn&& fn,
                             std::vector<Check> checks = {}) {
  std::vector<Var> axes = make_axes(shape.size(), "i");
  Expr body = std::invoke(std::forward<Fn>(fn), std::span<const Var>(axes));
  return make_compute(std::move(name), std::move(shape), std::move(axes), std::move(body),
                      std::move(checks));
}

/// One Var per symbol name, so that placeholders of one call share the Var
/// of a symbolic dim ("n" in f32[n, 3] and i64[n]).
class SymbolTable {
 public:
  /// The Var of symbol `name`, created on first use.
  [[nodiscard]] Var symbol(const std::string& name);

 private:
  std::vector<Var> vars_;
};

/// A placeholder of `type`: static dims become constants, symbolic dims the
/// table's Var, and each Any dim a fresh Var named "<name>_d<dim>".
[[nodiscard]] Tensor placeholder_for(const ir::TensorTypeNode& type, std::string name,
                                     SymbolTable& symbols);

// --- Index helpers ---------------------------------------------------------------------

/// The row-major flat index of `index` in `shape`.
[[nodiscard]] Expr ravel(std::span<const Expr> index, std::span<const Expr> shape);
/// The multi-index of row-major flat index `flat` in `shape` (the inverse of ravel).
[[nodiscard]] std::vector<Expr> unravel(const Expr& flat, std::span<const Expr> shape);
/// The product of `dims` (1 for none).
[[nodiscard]] Expr product(std::span<const Expr> dims);
/// The Vars of `axes` as index expressions.
[[nodiscard]] std::vector<Expr> as_indices(std::span<const Var> axes);
/// Whether two extents are provably equal: the same node or equal constants.
[[nodiscard]] bool provably_equal(const Expr& a, const Expr& b) noexcept;
/// The dtype a reduction of `dtype` accumulates in: f32 for f16 and bf16,
/// else `dtype` itself (integers wrap, which is exact modulo 2^bits).
[[nodiscard]] DType accumulator_dtype(DType dtype) noexcept;

// --- Traversal and printing -------------------------------------------------------------

/// Every tensor `outputs` read, directly or through other stages (loads in
/// bodies, shapes and checks), each once, producers before consumers; the
/// outputs themselves come last among what they need.
[[nodiscard]] std::vector<Tensor> stages(std::span<const Tensor> outputs);

/// Calls `fn` on each operand of `e` (for a load, its indices; for a
/// reduce, its axis extents, init and source); not recursively.
template <class Fn>
void for_each_child(const Expr& e, Fn&& fn) {
  switch (e.kind()) {
    case ExprKind::int_imm:
    case ExprKind::float_imm:
    case ExprKind::var:
      return;
    case ExprKind::unary:
      fn(e.as<UnaryNode>()->a);
      return;
    case ExprKind::binary:
      fn(e.as<BinaryNode>()->a);
      fn(e.as<BinaryNode>()->b);
      return;
    case ExprKind::select: {
      const auto* s = e.as<SelectNode>();
      fn(s->cond);
      fn(s->a);
      fn(s->b);
      return;
    }
    case ExprKind::cast:
      fn(e.as<CastNode>()->value);
      return;
    case ExprKind::load:
      for (const Expr& i : e.as<LoadNode>()->indices) fn(i);
      return;
    case ExprKind::reduce: {
      const auto* r = e.as<ReduceNode>();
      for (const IterVar& axis : r->axes) fn(axis.extent);
      fn(r->init);
      fn(r->source);
      return;
    }
  }
}

/// `e` rebuilt with each operand replaced by `fn(operand)` (the operands of
/// for_each_child); `e` itself when every operand comes back the same. The
/// step of a rewrite: a pass handles the nodes it changes and maps the rest.
[[nodiscard]] Expr map_children(const Expr& e, const std::function<Expr(const Expr&)>& fn);

/// Whether evaluating `e` may raise an error (a checked load or division).
[[nodiscard]] bool may_fault(const Expr& e);

/// "((a[i0] * 2:f32) + b[i0])"; see compute.cpp for the notation.
[[nodiscard]] std::string to_string(const Expr& expr);
/// Every stage of `outputs`, one per line, producers first:
///   placeholder x: f32[n, 4]
///   compute y(i0, i1): f32[n, 4] = exp(x[i0, i1])
///     check (n > 0) else invalid_argument "x is empty"
[[nodiscard]] std::string to_string(std::span<const Tensor> outputs);
[[nodiscard]] std::string to_string(const Tensor& output);

}  // namespace nimble::te
