#include "ops/compute.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <unordered_set>

#include "support/check.hpp"

// Notation of to_string:
//   constants   3 (i64), 3:i32, true, 0.5:f32, -inf:f32
//   operators   (a + b), (a / b), (a % b), (a < b), (a && b); checked: (a /! b), (a %! b)
//   functions   exp(x), floordiv(a, b), maximum(a, b), pow!(a, b), select(c, a, b), cast(f32, x)
//   loads       x[i0, i1]; checked: data[i0, k]!
//   reductions  sum(x[i0, k0] for k0 < 4, init 0:f32)

namespace nimble::te {

std::string_view to_string(UnaryOp op) noexcept {
  switch (op) {
#define NIMBLE_UNARY(name, operands, cost, value) \
  case UnaryOp::name:                              \
    return #name;
#include "ops/unary_ops.def"
#undef NIMBLE_UNARY
  }
  return "";
}

UnaryOperands operands_of(UnaryOp op) noexcept {
  switch (op) {
#define NIMBLE_UNARY(name, operands, cost, value) \
  case UnaryOp::name:                              \
    return UnaryOperands::operands;
#include "ops/unary_ops.def"
#undef NIMBLE_UNARY
  }
  return UnaryOperands::floating;
}

int cost_of(UnaryOp op) noexcept {
  switch (op) {
#define NIMBLE_UNARY(name, operands, cost, value) \
  case UnaryOp::name:                              \
    return cost;
#include "ops/unary_ops.def"
#undef NIMBLE_UNARY
  }
  return 1;
}

std::string_view to_string(BinaryOp op) noexcept {
  switch (op) {
    case BinaryOp::add:
      return "add";
    case BinaryOp::sub:
      return "sub";
    case BinaryOp::mul:
      return "mul";
    case BinaryOp::div:
      return "div";
    case BinaryOp::floordiv:
      return "floordiv";
    case BinaryOp::floormod:
      return "floormod";
    case BinaryOp::rem:
      return "rem";
    case BinaryOp::maximum:
      return "maximum";
    case BinaryOp::minimum:
      return "minimum";
    case BinaryOp::pow:
      return "pow";
    case BinaryOp::eq:
      return "eq";
    case BinaryOp::ne:
      return "ne";
    case BinaryOp::lt:
      return "lt";
    case BinaryOp::le:
      return "le";
    case BinaryOp::gt:
      return "gt";
    case BinaryOp::ge:
      return "ge";
    case BinaryOp::logical_and:
      return "logical_and";
    case BinaryOp::logical_or:
      return "logical_or";
  }
  return "";
}

std::string_view to_string(ReduceKind kind) noexcept {
  switch (kind) {
    case ReduceKind::sum:
      return "sum";
    case ReduceKind::max:
      return "max";
    case ReduceKind::min:
      return "min";
    case ReduceKind::argmax:
      return "argmax";
  }
  return "";
}

namespace {

bool is_int_like(DType dtype) noexcept {
  return is_integer(dtype) || dtype == DType::boolean;
}

// `v` wrapped to integer (or bool) `dtype`, as two's complement.
std::int64_t wrap(std::int64_t v, DType dtype) noexcept {
  switch (dtype) {
    case DType::i8:
      return static_cast<std::int8_t>(v);
    case DType::i32:
      return static_cast<std::int32_t>(v);
    case DType::boolean:
      return v != 0 ? 1 : 0;
    default:
      return v;
  }
}

std::int64_t wrapping(std::uint64_t bits) noexcept {
  return static_cast<std::int64_t>(bits);  // modular since C++20
}

bool is_comparison(BinaryOp op) noexcept {
  return op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt || op == BinaryOp::le ||
         op == BinaryOp::gt || op == BinaryOp::ge;
}

bool is_logical(BinaryOp op) noexcept {
  return op == BinaryOp::logical_and || op == BinaryOp::logical_or;
}

bool is_integer_only(BinaryOp op) noexcept {
  return op == BinaryOp::floordiv || op == BinaryOp::floormod;
}

bool may_check(BinaryOp op) noexcept {
  return op == BinaryOp::div || op == BinaryOp::floordiv || op == BinaryOp::floormod ||
         op == BinaryOp::rem || op == BinaryOp::pow;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// The value of `op` on integer constants of `dtype` when it is certain to be
// defined (no division by zero or overflow), else nullopt.
std::optional<std::int64_t> fold_ints(BinaryOp op, std::int64_t a, std::int64_t b, DType dtype) {
  const auto ua = static_cast<std::uint64_t>(a);
  const auto ub = static_cast<std::uint64_t>(b);
  switch (op) {
    case BinaryOp::add:
      return wrap(wrapping(ua + ub), dtype);
    case BinaryOp::sub:
      return wrap(wrapping(ua - ub), dtype);
    case BinaryOp::mul:
      return wrap(wrapping(ua * ub), dtype);
    case BinaryOp::floordiv:
      if (b <= 0) return std::nullopt;
      return floor_div(a, b);
    case BinaryOp::floormod:
      if (b <= 0) return std::nullopt;
      return a - floor_div(a, b) * b;
    case BinaryOp::maximum:
      return std::max(a, b);
    case BinaryOp::minimum:
      return std::min(a, b);
    case BinaryOp::eq:
      return a == b;
    case BinaryOp::ne:
      return a != b;
    case BinaryOp::lt:
      return a < b;
    case BinaryOp::le:
      return a <= b;
    case BinaryOp::gt:
      return a > b;
    case BinaryOp::ge:
      return a >= b;
    case BinaryOp::logical_and:
      return a != 0 && b != 0;
    case BinaryOp::logical_or:
      return a != 0 || b != 0;
    default:
      return std::nullopt;
  }
}

}  // namespace

bool may_fault(const Expr& e) {
  if (const auto* l = e.as<LoadNode>(); l && l->checked) return true;
  if (const auto* b = e.as<BinaryNode>(); b && b->checked) return true;
  bool found = false;
  for_each_child(e, [&](const Expr& child) { found = found || may_fault(child); });
  return found;
}

namespace {

// Identities that keep one operand, or drop only operands that cannot fault.
std::optional<Expr> fold_identity(BinaryOp op, const Expr& a, const Expr& b) {
  const std::optional<std::int64_t> ca = as_int(a);
  const std::optional<std::int64_t> cb = as_int(b);
  if (!is_int_like(a.dtype())) return std::nullopt;
  switch (op) {
    case BinaryOp::add:
      if (ca == 0) return b;
      if (cb == 0) return a;
      break;
    case BinaryOp::sub:
      if (cb == 0) return a;
      if (a.same_as(b) && a.kind() == ExprKind::var) return int_imm(0, a.dtype());
      break;
    case BinaryOp::mul:
      if (ca == 1) return b;
      if (cb == 1) return a;
      if (ca == 0 && !may_fault(b)) return a;
      if (cb == 0 && !may_fault(a)) return b;
      break;
    case BinaryOp::floordiv:
      if (cb == 1) return a;
      break;
    case BinaryOp::maximum:
    case BinaryOp::minimum:
      if (a.same_as(b)) return a;
      break;
    case BinaryOp::eq:
    case BinaryOp::le:
    case BinaryOp::ge:
      if (a.same_as(b) && a.kind() == ExprKind::var) return int_imm(1, DType::boolean);
      break;
    case BinaryOp::ne:
    case BinaryOp::lt:
    case BinaryOp::gt:
      if (a.same_as(b) && a.kind() == ExprKind::var) return int_imm(0, DType::boolean);
      break;
    case BinaryOp::logical_and:
      if (ca == 1) return b;
      if (cb == 1) return a;
      if (ca == 0 && !may_fault(b)) return a;
      if (cb == 0 && !may_fault(a)) return b;
      break;
    case BinaryOp::logical_or:
      if (ca == 0) return b;
      if (cb == 0) return a;
      if (ca == 1 && !may_fault(b)) return a;
      if (cb == 1 && !may_fault(a)) return b;
      break;
    default:
      break;
  }
  return std::nullopt;
}


bool contains_reduce(const Expr& e) {
  if (e.kind() == ExprKind::reduce) return true;
  bool found = false;
  for_each_child(e, [&](const Expr& child) { found = found || contains_reduce(child); });
  return found;
}

}  // namespace

// --- handles ---------------------------------------------------------------------------

Expr Expr::from_i64(std::int64_t value) {
  return int_imm(value, DType::i64);
}

Var::Var(std::string name) : Expr(make_ref<VarNode>(std::move(name))) {}

const VarNode* Var::node() const noexcept {
  return static_cast<const VarNode*>(get());
}

const std::string& Var::name() const noexcept {
  return node()->name;
}

const std::string& Tensor::name() const noexcept {
  return node_->name;
}
DType Tensor::dtype() const noexcept {
  return node_->dtype;
}
const std::vector<Expr>& Tensor::shape() const noexcept {
  return node_->shape;
}
bool Tensor::is_placeholder() const noexcept {
  return node_->kind == TensorNode::Kind::placeholder;
}
Expr Tensor::operator()(std::vector<Expr> indices) const {
  return load(*this, std::move(indices));
}

// --- construction ------------------------------------------------------------------------

Expr constant(DType dtype, double value) {
  if (is_floating(dtype)) return Expr(make_ref<FloatImmNode>(value, dtype));
  NIMBLE_ASSERT(value == std::trunc(value), "constant: an integer dtype needs a whole value");
  return int_imm(static_cast<std::int64_t>(value), dtype);
}

Expr int_imm(std::int64_t value, DType dtype) {
  NIMBLE_ASSERT(is_int_like(dtype), "int_imm: an integer or bool dtype");
  return Expr(make_ref<IntImmNode>(wrap(value, dtype), dtype));
}

std::optional<std::int64_t> as_int(const Expr& e) noexcept {
  if (const auto* imm = e.as<IntImmNode>()) return imm->value;
  return std::nullopt;
}

Expr lowest(DType dtype) {
  switch (dtype) {
    case DType::i8:
      return int_imm(std::numeric_limits<std::int8_t>::min(), dtype);
    case DType::i32:
      return int_imm(std::numeric_limits<std::int32_t>::min(), dtype);
    case DType::i64:
      return int_imm(std::numeric_limits<std::int64_t>::min(), dtype);
    case DType::boolean:
      return int_imm(0, dtype);
    default:
      return constant(dtype, -std::numeric_limits<double>::infinity());
  }
}

Expr highest(DType dtype) {
  switch (dtype) {
    case DType::i8:
      return int_imm(std::numeric_limits<std::int8_t>::max(), dtype);
    case DType::i32:
      return int_imm(std::numeric_limits<std::int32_t>::max(), dtype);
    case DType::i64:
      return int_imm(std::numeric_limits<std::int64_t>::max(), dtype);
    case DType::boolean:
      return int_imm(1, dtype);
    default:
      return constant(dtype, std::numeric_limits<double>::infinity());
  }
}

Expr unary(UnaryOp op, Expr a) {
  NIMBLE_ASSERT(a.defined(), "unary: undefined operand");
  switch (operands_of(op)) {
    case UnaryOperands::boolean:
      NIMBLE_ASSERT(a.dtype() == DType::boolean, "logical_not takes bool");
      if (const auto c = as_int(a)) return int_imm(*c == 0 ? 1 : 0, DType::boolean);
      break;
    case UnaryOperands::numeric: NIMBLE_ASSERT(a.dtype() != DType::boolean, "neg and abs take numbers"); break;
    case UnaryOperands::floating: NIMBLE_ASSERT(is_floating(a.dtype()), "this unary op takes floating point"); break;
  }
  return Expr(make_ref<UnaryNode>(op, std::move(a)));
}

Expr binary(BinaryOp op, Expr a, Expr b, bool checked) {
  NIMBLE_ASSERT(a.defined() && b.defined(), "binary: undefined operand");
  NIMBLE_ASSERT(a.dtype() == b.dtype(), "binary: operands of different dtypes");
  const DType dtype = a.dtype();
  if (is_logical(op)) NIMBLE_ASSERT(dtype == DType::boolean, "logical ops take bool");
  if (!is_logical(op) && !is_comparison(op))
    NIMBLE_ASSERT(dtype != DType::boolean, "arithmetic takes numbers");
  if (is_integer_only(op)) NIMBLE_ASSERT(is_integer(dtype), "floordiv/floormod take integers");
  NIMBLE_ASSERT(!checked || (may_check(op) && is_integer(dtype)),
                "only integer division, remainder and power are checked");
  const DType result = is_comparison(op) || is_logical(op) ? DType::boolean : dtype;
  if (!checked) {
    const std::optional<std::int64_t> ca = as_int(a);
    const std::optional<std::int64_t> cb = as_int(b);
    if (ca && cb)
      if (const auto folded = fold_ints(op, *ca, *cb, dtype)) return int_imm(*folded, result);
    if (auto kept = fold_identity(op, a, b)) return *kept;
  }
  return Expr(make_ref<BinaryNode>(op, std::move(a), std::move(b), checked, result));
}

Expr select(Expr cond, Expr a, Expr b) {
  NIMBLE_ASSERT(cond.defined() && a.defined() && b.defined(), "select: undefined operand");
  NIMBLE_ASSERT(cond.dtype() == DType::boolean, "select: the condition must be bool");
  NIMBLE_ASSERT(a.dtype() == b.dtype(), "select: operands of different dtypes");
  if (const auto c = as_int(cond)) return *c != 0 ? a : b;
  if (a.same_as(b)) return a;
  const auto ca = as_int(a);
  const auto cb = as_int(b);
  if (ca && cb && *ca == *cb) return a;
  return Expr(make_ref<SelectNode>(std::move(cond), std::move(a), std::move(b)));
}

Expr cast(DType dtype, Expr value) {
  NIMBLE_ASSERT(value.defined(), "cast: undefined operand");
  if (value.dtype() == dtype) return value;
  if (const auto c = as_int(value); c && is_int_like(dtype)) return int_imm(*c, dtype);
  return Expr(make_ref<CastNode>(dtype, std::move(value)));
}

namespace {

Expr make_load(const Tensor& tensor, std::vector<Expr> indices, bool checked) {
  NIMBLE_ASSERT(tensor.defined(), "load: undefined tensor");
  NIMBLE_ASSERT(indices.size() == tensor.ndim(), "load: one index per dim");
  for (const Expr& i : indices)
    NIMBLE_ASSERT(i.defined() && i.dtype() == DType::i64, "load: indices are i64");
  return Expr(make_ref<LoadNode>(tensor, std::move(indices), checked));
}

}  // namespace

Expr load(const Tensor& tensor, std::vector<Expr> indices) {
  return make_load(tensor, std::move(indices), false);
}

Expr checked_load(const Tensor& tensor, std::vector<Expr> indices) {
  return make_load(tensor, std::move(indices), true);
}

IterVar reduce_axis(Expr extent, std::string name) {
  NIMBLE_ASSERT(extent.dtype() == DType::i64, "reduce_axis: the extent is i64");
  return {Var(std::move(name)), std::move(extent)};
}

Expr reduce(ReduceKind kind, Expr source, std::vector<IterVar> axes, Expr init) {
  NIMBLE_ASSERT(source.defined() && init.defined(), "reduce: undefined operand");
  NIMBLE_ASSERT(init.dtype() == source.dtype(), "reduce: init has the source's dtype");
  NIMBLE_ASSERT(!contains_reduce(source), "reduce: nested reductions are separate stages");
  NIMBLE_ASSERT(kind != ReduceKind::argmax || axes.size() == 1, "argmax reduces one axis");
  NIMBLE_ASSERT(source.dtype() != DType::boolean || kind != ReduceKind::sum, "sum of numbers");
  const DType dtype = kind == ReduceKind::argmax ? DType::i64 : source.dtype();
  return Expr(
      make_ref<ReduceNode>(kind, std::move(source), std::move(axes), std::move(init), dtype));
}

Expr map_children(const Expr& e, const std::function<Expr(const Expr&)>& fn) {
  if (!e.defined()) return e;
  switch (e.kind()) {
    case ExprKind::int_imm:
    case ExprKind::float_imm:
    case ExprKind::var:
      return e;
    case ExprKind::unary: {
      const auto* u = e.as<UnaryNode>();
      Expr a = fn(u->a);
      return a.same_as(u->a) ? e : unary(u->op, std::move(a));
    }
    case ExprKind::binary: {
      const auto* b = e.as<BinaryNode>();
      Expr x = fn(b->a);
      Expr y = fn(b->b);
      return x.same_as(b->a) && y.same_as(b->b) ? e : binary(b->op, std::move(x), std::move(y), b->checked);
    }
    case ExprKind::select: {
      const auto* s = e.as<SelectNode>();
      Expr c = fn(s->cond);
      Expr x = fn(s->a);
      Expr y = fn(s->b);
      return c.same_as(s->cond) && x.same_as(s->a) && y.same_as(s->b) ? e
                                                                       : select(std::move(c), std::move(x), std::move(y));
    }
    case ExprKind::cast: {
      const Expr& value = e.as<CastNode>()->value;
      Expr v = fn(value);
      return v.same_as(value) ? e : cast(e.dtype(), std::move(v));
    }
    case ExprKind::load: {
      const auto* l = e.as<LoadNode>();
      std::vector<Expr> indices;
      bool same = true;
      for (const Expr& i : l->indices) {
        indices.push_back(fn(i));
        same = same && indices.back().same_as(i);
      }
      if (same) return e;
      return l->checked ? checked_load(l->tensor, std::move(indices)) : load(l->tensor, std::move(indices));
    }
    case ExprKind::reduce: {
      const auto* r = e.as<ReduceNode>();
      std::vector<IterVar> axes;
      bool same = true;
      for (const IterVar& a : r->axes) {
        axes.push_back({a.var, fn(a.extent)});
        same = same && axes.back().extent.same_as(a.extent);
      }
      Expr init = fn(r->init);
      Expr source = fn(r->source);
      if (same && init.same_as(r->init) && source.same_as(r->source)) return e;
      return reduce(r->reduce_kind, std::move(source), std::move(axes), std::move(init));
    }
  }
  return e;
}

Expr reduce_sum(Expr source, std::vector<IterVar> axes) {
  Expr init = constant(source.dtype(), 0);
  return reduce(ReduceKind::sum, std::move(source), std::move(axes), std::move(init));
}

Expr reduce_max(Expr source, std::vector<IterVar> axes) {
  Expr init = lowest(source.dtype());
  return reduce(ReduceKind::max, std::move(source), std::move(axes), std::move(init));
}

Expr reduce_min(Expr source, std::vector<IterVar> axes) {
  Expr init = highest(source.dtype());
  return reduce(ReduceKind::min, std::move(source), std::move(axes), std::move(init));
}

Expr reduce_argmax(Expr source, IterVar axis) {
  Expr init = lowest(source.dtype());
  return reduce(ReduceKind::argmax, std::move(source), {std::move(axis)}, std::move(init));
}

void add_check(std::vector<Check>& checks, Expr condition, ErrorKind kind, std::string message) {
  NIMBLE_ASSERT(condition.dtype() == DType::boolean, "add_check: the condition is bool");
  if (as_int(condition) == 1) return;
  checks.push_back({std::move(condition), kind, std::move(message)});
}

// --- tensors -------------------------------------------------------------------------------

namespace {

void check_shape(const std::vector<Expr>& shape) {
  for (const Expr& d : shape)
    NIMBLE_ASSERT(d.defined() && d.dtype() == DType::i64, "extents are i64");
}

}  // namespace

Tensor placeholder(std::string name, DType dtype, std::vector<Expr> shape) {
  check_shape(shape);
  return Tensor(make_ref<TensorNode>(TensorNode::Kind::placeholder, std::move(name), dtype,
                                     std::move(shape), std::vector<Var>{}, Expr(),
                                     std::vector<Check>{}));
}

Tensor make_compute(std::string name, std::vector<Expr> shape, std::vector<Var> axes, Expr body,
                    std::vector<Check> checks) {
  check_shape(shape);
  NIMBLE_ASSERT(axes.size() == shape.size(), "compute: one axis per dim");
  NIMBLE_ASSERT(body.defined(), "compute: undefined body");
  NIMBLE_ASSERT(body.kind() == ExprKind::reduce || !contains_reduce(body),
                "compute: a reduce must be the whole body (put the epilogue in its own stage)");
  for (const Check& c : checks)
    NIMBLE_ASSERT(c.condition.defined() && c.condition.dtype() == DType::boolean,
                  "compute: checks are bool");
  const DType dtype = body.dtype();
  return Tensor(make_ref<TensorNode>(TensorNode::Kind::compute, std::move(name), dtype,
                                     std::move(shape), std::move(axes), std::move(body),
                                     std::move(checks)));
}

std::vector<Var> make_axes(std::size_t count, std::string_view prefix) {
  std::vector<Var> axes;
  for (std::size_t d = 0; d < count; ++d) axes.emplace_back(fmt::format("{}{}", prefix, d));
  return axes;
}

Var SymbolTable::symbol(const std::string& name) {
  for (const Var& v : vars_)
    if (v.name() == name) return v;
  return vars_.emplace_back(name);
}

Tensor placeholder_for(const ir::TensorTypeNode& type, std::string name, SymbolTable& symbols) {
  std::vector<Expr> shape;
  for (std::size_t d = 0; d < type.rank(); ++d) {
    const ir::Dim& dim = type.shape[d];
    if (dim.is_fixed())
      shape.emplace_back(dim.value());
    else if (dim.is_symbol())
      shape.push_back(symbols.symbol(dim.name()));
    else
      shape.push_back(Var(fmt::format("{}_d{}", name, d)));
  }
  return placeholder(std::move(name), type.dtype, std::move(shape));
}

// --- index helpers ---------------------------------------------------------------------------

Expr ravel(std::span<const Expr> index, std::span<const Expr> shape) {
  NIMBLE_ASSERT(index.size() == shape.size(), "ravel: one index per dim");
  if (index.empty()) return 0;
  Expr flat = index[0];
  for (std::size_t d = 1; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

std::vector<Expr> unravel(const Expr& flat, std::span<const Expr> shape) {
  // index[d] = (flat / stride[d]) mod shape[d]; the first dim needs no mod
  // (flat < numel) and the last no division (stride 1).
  std::vector<Expr> index(shape.size());
  Expr stride = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    Expr i = floordiv(flat, stride);
    index[d] = d == 0 ? i : floormod(i, shape[d]);
    stride = stride * shape[d];
  }
  return index;
}

Expr product(std::span<const Expr> dims) {
  Expr p = 1;
  for (const Expr& d : dims) p = p * d;
  return p;
}

std::vector<Expr> as_indices(std::span<const Var> axes) {
  return {axes.begin(), axes.end()};
}

bool provably_equal(const Expr& a, const Expr& b) noexcept {
  if (a.same_as(b)) return true;
  const auto ca = as_int(a);
  const auto cb = as_int(b);
  return ca && cb && *ca == *cb;
}

DType accumulator_dtype(DType dtype) noexcept {
  return dtype == DType::f16 || dtype == DType::bf16 ? DType::f32 : dtype;
}

// --- traversal -------------------------------------------------------------------------------

namespace {

class StageCollector {
 public:
  void visit(const Tensor& t) {
    if (!seen_.insert(t.get()).second) return;
    for (const Expr& d : t.shape()) visit(d);
    if (!t.is_placeholder()) {
      for (const Check& c : t->checks) visit(c.condition);
      visit(t->body);
    }
    order_.push_back(t);
  }
  void visit(const Expr& e) {
    if (const auto* l = e.as<LoadNode>()) visit(l->tensor);
    for_each_child(e, [&](const Expr& child) { visit(child); });
  }
  std::vector<Tensor> take() { return std::move(order_); }

 private:
  std::unordered_set<const TensorNode*> seen_;
  std::vector<Tensor> order_;
};

}  // namespace

std::vector<Tensor> stages(std::span<const Tensor> outputs) {
  StageCollector collector;
  for (const Tensor& t : outputs) collector.visit(t);
  return collector.take();
}

// --- printing ----------------------------------------------------------------------------------

namespace {

std::string_view infix(BinaryOp op) noexcept {
  switch (op) {
    case BinaryOp::add:
      return "+";
    case BinaryOp::sub:
      return "-";
    case BinaryOp::mul:
      return "*";
    case BinaryOp::div:
      return "/";
    case BinaryOp::rem:
      return "%";
    case BinaryOp::eq:
      return "==";
    case BinaryOp::ne:
      return "!=";
    case BinaryOp::lt:
      return "<";
    case BinaryOp::le:
      return "<=";
    case BinaryOp::gt:
      return ">";
    case BinaryOp::ge:
      return ">=";
    case BinaryOp::logical_and:
      return "&&";
    case BinaryOp::logical_or:
      return "||";
    default:
      return "";  // printed as a function
  }
}

void print(const Expr& e, std::string& out);

void print_list(std::span<const Expr> items, std::string& out) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += ", ";
    print(items[i], out);
  }
}

void print(const Expr& e, std::string& out) {
  switch (e.kind()) {
    case ExprKind::int_imm: {
      const std::int64_t v = e.as<IntImmNode>()->value;
      if (e.dtype() == DType::boolean)
        out += v != 0 ? "true" : "false";
      else if (e.dtype() == DType::i64)
        out += fmt::format("{}", v);
      else
        out += fmt::format("{}:{}", v, nimble::to_string(e.dtype()));
      return;
    }
    case ExprKind::float_imm:
      out += fmt::format("{}:{}", e.as<FloatImmNode>()->value, nimble::to_string(e.dtype()));
      return;
    case ExprKind::var:
      out += e.as<VarNode>()->name;
      return;
    case ExprKind::unary: {
      const auto* u = e.as<UnaryNode>();
      out += to_string(u->op);
      out += '(';
      print(u->a, out);
      out += ')';
      return;
    }
    case ExprKind::binary: {
      const auto* b = e.as<BinaryNode>();
      const std::string_view symbol = infix(b->op);
      const std::string_view mark = b->checked ? "!" : "";
      if (symbol.empty()) {
        out += fmt::format("{}{}(", to_string(b->op), mark);
        print(b->a, out);
        out += ", ";
        print(b->b, out);
        out += ')';
      } else {
        out += '(';
        print(b->a, out);
        out += fmt::format(" {}{} ", symbol, mark);
        print(b->b, out);
        out += ')';
      }
      return;
    }
    case ExprKind::select: {
      const auto* s = e.as<SelectNode>();
      out += "select(";
      print(s->cond, out);
      out += ", ";
      print(s->a, out);
      out += ", ";
      print(s->b, out);
      out += ')';
      return;
    }
    case ExprKind::cast:
      out += fmt::format("cast({}, ", nimble::to_string(e.dtype()));
      print(e.as<CastNode>()->value, out);
      out += ')';
      return;
    case ExprKind::load: {
      const auto* l = e.as<LoadNode>();
      out += l->tensor.name();
      out += '[';
      print_list(l->indices, out);
      out += l->checked ? "]!" : "]";
      return;
    }
    case ExprKind::reduce: {
      const auto* r = e.as<ReduceNode>();
      out += to_string(r->reduce_kind);
      out += '(';
      print(r->source, out);
      for (std::size_t i = 0; i < r->axes.size(); ++i) {
        out += i == 0 ? " for " : ", ";
        out += r->axes[i].var.name();
        out += " < ";
        print(r->axes[i].extent, out);
      }
      out += ", init ";
      print(r->init, out);
      out += ')';
      return;
    }
  }
}

std::string shape_string(const Tensor& t) {
  std::string out = fmt::format("{}[", nimble::to_string(t.dtype()));
  print_list(t.shape(), out);
  out += ']';
  return out;
}

}  // namespace

std::string to_string(const Expr& expr) {
  if (!expr.defined()) return "<undefined>";
  std::string out;
  print(expr, out);
  return out;
}

std::string to_string(std::span<const Tensor> outputs) {
  std::string out;
  for (const Tensor& t : stages(outputs)) {
    if (t.is_placeholder()) {
      out += fmt::format("placeholder {}: {}\n", t.name(), shape_string(t));
      continue;
    }
    std::vector<std::string> axes;
    for (const Var& v : t->axes) axes.push_back(v.name());
    out += fmt::format("compute {}({}): {} = {}\n", t.name(), fmt::join(axes, ", "),
                       shape_string(t), to_string(t->body));
    for (const Check& c : t->checks)
      out += fmt::format("  check {} else {} \"{}\"\n", to_string(c.condition),
                         nimble::to_string(c.kind), c.message);
  }
  return out;
}

std::string to_string(const Tensor& output) {
  return to_string(std::span<const Tensor>(&output, 1));
}

}  // namespace nimble::te
