// Binary ops with numpy broadcasting (broadcast.hpp): (a, b) of one dtype.
// Arithmetic takes numeric dtypes and keeps it; comparisons take any dtype
// and give bool; logical_and/or take bool. where(cond, x, y) broadcasts all three.
//
// Reference semantics (the arithmetic rules of reference_util.hpp apply):
//  - shapes broadcast at run time; a mismatch is Error(invalid_argument)
//    naming both shapes and the result dim.
//  - add, sub, mul: IEEE in double rounded once; integers wrap.
//  - div: IEEE for floating point (x/0 = ±inf, 0/0 = NaN). Integers truncate
//    toward zero; a zero divisor and INT_MIN / -1 raise Error(runtime_error)
//    naming the result index (never a trap).
//  - maximum, minimum: a NaN operand gives NaN (as PyTorch).
//  - power: std::pow in double for floating point. Integers: exact, wrapping,
//    x^0 = 1 (also 0^0); a negative exponent raises Error(runtime_error).
//  - comparisons on every dtype (f16/bf16 compared as f32): IEEE, so any
//    comparison with NaN is false except not_equal.
//  - logical_and, logical_or on bool; where(cond, x, y) picks x where cond.
//
// Compute rules (pattern broadcast): out[i] = f(a[ia], b[ib]) over the
// broadcast shape, where an input dim that may be 1 at run time reads index 0
// when it is (broadcast.hpp); the rule checks that the run-time dims
// broadcast. Integer div and power are checked (zero divisor, INT_MIN / -1,
// a negative exponent raise an error at the element).
#include <cmath>
#include <functional>
#include <limits>

#include "ops/broadcast.hpp"
#include "ops/compute.hpp"
#include "ops/ops.hpp"
#include "ops/reference_util.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kAB[] = {"a", "b"};
constexpr std::string_view kWhereArgs[] = {"cond", "x", "y"};

// The broadcast shape of a and b, which must have one dtype.
template <const OpDef& (*Op)()>
Shape broadcast_pair(std::span<const Type> args) {
  const TensorTypeNode& a = expect_tensor(args, 0, Op());
  const TensorTypeNode& b = expect_tensor(args, 1, Op());
  expect_same_dtype(a, "a", b, "b");
  const BroadcastOperand operands[] = {{"a", &a}, {"b", &b}};
  return broadcast_shapes(operands);
}

template <const OpDef& (*Op)()>
Type arithmetic(std::span<const Type> args, const ir::Attrs&) {
  expect_numeric(expect_tensor(args, 0, Op()), "a");
  Shape shape = broadcast_pair<Op>(args);
  return ir::tensor_type(std::move(shape), args[0].as<TensorTypeNode>()->dtype);
}

template <const OpDef& (*Op)()>
Type comparison(std::span<const Type> args, const ir::Attrs&) {
  return ir::tensor_type(broadcast_pair<Op>(args), DType::boolean);
}

template <const OpDef& (*Op)()>
Type logical(std::span<const Type> args, const ir::Attrs&) {
  expect_dtype(expect_tensor(args, 0, Op()), "a", DType::boolean);
  expect_dtype(expect_tensor(args, 1, Op()), "b", DType::boolean);
  return ir::tensor_type(broadcast_pair<Op>(args), DType::boolean);
}

Type where_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& cond = expect_tensor(args, 0, where());
  const TensorTypeNode& x = expect_tensor(args, 1, where());
  const TensorTypeNode& y = expect_tensor(args, 2, where());
  expect_dtype(cond, "cond", DType::boolean);
  expect_same_dtype(x, "x", y, "y");
  const BroadcastOperand operands[] = {{"cond", &cond}, {"x", &x}, {"y", &y}};
  return ir::tensor_type(broadcast_shapes(operands), x.dtype);
}

// --- reference kernels ------------------------------------------------------------------

// A data error of one element; binary_kernel adds where it happened.
struct ElementError {
  const char* message;
};

// out = f(a, b) over the broadcast of a and b, for a dtype `kAccepts` allows;
// the result has a's dtype, or bool when kToBool. `f` takes and returns
// typed elements and may throw ElementError.
template <ref::Accepts kAccepts, bool kToBool, class Fn>
Value binary_kernel(std::span<const Value> args, Fn f) {
  const Tensor& a = ref::tensor_arg(args, 0);
  const Tensor& b = ref::tensor_arg(args, 1);
  if (a.dtype() != b.dtype())
    throw_error(ErrorKind::type_error, "a is {} but b is {}", to_string(a.dtype()),
                to_string(b.dtype()));
  const ref::Operand operands[] = {{"a", &a.shape()}, {"b", &b.shape()}};
  const nimble::Shape shape = ref::broadcast_shapes(operands);
  Tensor out = ref::fresh(shape, kToBool ? DType::boolean : a.dtype());
  ref::dispatch<kAccepts>(a.dtype(), "a", [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<kToBool, bool, T>;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    R* po = out.data<R>();
    std::int64_t at = 0;
    try {
      ref::for_each_broadcast<2>(shape, {&a.shape(), &b.shape()},
                                 [&](std::int64_t flat, const std::array<std::int64_t, 2>& off) {
                                   at = flat;
                                   po[flat] = f(pa[off[0]], pb[off[1]]);
                                 });
    } catch (const ElementError& e) {
      throw_error(ErrorKind::runtime_error, "{} at index {} of the result", e.message,
                  ref::index_string(shape, at));
    }
  });
  return out;
}

// A numeric op: `F` on doubles for floating point, `I` on integers.
template <class F, class I>
auto arithmetic_fn(F floating, I integer) {
  return [floating, integer](auto x, auto y) {
    using T = decltype(x);
    if constexpr (ref::is_float_v<T>)
      return ref::from_double<T>(floating(to_double(x), to_double(y)));
    else
      return integer(x, y);
  };
}

template <class T>
std::uint64_t bits(T v) {
  return static_cast<std::uint64_t>(v);
}

Value add_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::numeric, false>(
      args,
      arithmetic_fn([](double x, double y) { return x + y; },
                    [](auto x, auto y) { return ref::wrap<decltype(x)>(bits(x) + bits(y)); }));
}

Value sub_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::numeric, false>(
      args,
      arithmetic_fn([](double x, double y) { return x - y; },
                    [](auto x, auto y) { return ref::wrap<decltype(x)>(bits(x) - bits(y)); }));
}

Value mul_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::numeric, false>(
      args,
      arithmetic_fn([](double x, double y) { return x * y; },
                    [](auto x, auto y) { return ref::wrap<decltype(x)>(bits(x) * bits(y)); }));
}

Value div_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::numeric, false>(
      args, arithmetic_fn([](double x, double y) { return x / y; },
                          [](auto x, auto y) {
                            using T = decltype(x);
                            if (y == 0) throw ElementError{"integer division by zero"};
                            if (x == std::numeric_limits<T>::min() && y == -1)
                              throw ElementError{"integer overflow: INT_MIN / -1"};
                            return static_cast<T>(x / y);  // C++ truncates toward zero
                          }));
}

template <bool kMaximum>
Value extremum_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::numeric, false>(args, [](auto x, auto y) {
    const auto wx = ref::widen(x);
    const auto wy = ref::widen(y);
    if constexpr (ref::is_float_v<decltype(x)>) {
      if (std::isnan(wx)) return x;
      if (std::isnan(wy)) return y;
    }
    return (kMaximum ? wx < wy : wy < wx) ? y : x;
  });
}

Value power_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::numeric, false>(
      args, arithmetic_fn([](double x, double y) { return std::pow(x, y); },
                          [](auto x, auto y) {
                            using T = decltype(x);
                            if (y < 0) throw ElementError{"negative exponent in integer power"};
                            std::uint64_t result = 1;
                            std::uint64_t base = bits(x);
                            for (auto e = static_cast<std::uint64_t>(y); e != 0; e >>= 1) {
                              if (e & 1) result *= base;
                              base *= base;
                            }
                            return ref::wrap<T>(result);
                          }));
}

template <class Compare>
Value comparison_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::any, true>(
      args, [](auto x, auto y) { return Compare{}(ref::widen(x), ref::widen(y)); });
}

Value logical_and_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::boolean, true>(args, [](bool x, bool y) { return x && y; });
}

Value logical_or_kernel(std::span<const Value> args, const ir::Attrs&) {
  return binary_kernel<ref::Accepts::boolean, true>(args, [](bool x, bool y) { return x || y; });
}

Value where_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& cond = ref::tensor_arg(args, 0);
  const Tensor& x = ref::tensor_arg(args, 1);
  const Tensor& y = ref::tensor_arg(args, 2);
  if (cond.dtype() != DType::boolean)
    throw_error(ErrorKind::type_error, "cond must be bool, got {}", to_string(cond.dtype()));
  if (x.dtype() != y.dtype())
    throw_error(ErrorKind::type_error, "x is {} but y is {}", to_string(x.dtype()),
                to_string(y.dtype()));
  const ref::Operand operands[] = {{"cond", &cond.shape()}, {"x", &x.shape()}, {"y", &y.shape()}};
  const nimble::Shape shape = ref::broadcast_shapes(operands);
  Tensor out = ref::fresh(shape, x.dtype());
  ref::dispatch<ref::Accepts::any>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    const bool* pc = cond.data<bool>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    ref::for_each_broadcast<3>(shape, {&cond.shape(), &x.shape(), &y.shape()},
                               [&](std::int64_t flat, const std::array<std::int64_t, 3>& off) {
                                 po[flat] = pc[off[0]] ? px[off[1]] : py[off[2]];
                               });
  });
  return out;
}

// --- compute rules ------------------------------------------------------------------------

// out[i] = F(a, b) at the elements of a and b that broadcast to i.
template <const OpDef& (*Op)(), te::Expr (*F)(te::Expr, te::Expr)>
std::vector<te::Tensor> binary_rule(std::span<const te::Tensor> inputs, const ir::Attrs&) {
  const te::Tensor& a = inputs[0];
  const te::Tensor& b = inputs[1];
  TeBroadcast shape = broadcast_shapes(inputs.first(2), kAB);
  return {te::compute(
      shape.shape, std::string(Op().name),
      [&](std::span<const te::Var> i) {
        return F(load_broadcast(a, i, shape.shape), load_broadcast(b, i, shape.shape));
      },
      std::move(shape.checks))};
}

te::Expr add_expr(te::Expr a, te::Expr b) {
  return a + b;
}
te::Expr sub_expr(te::Expr a, te::Expr b) {
  return a - b;
}
te::Expr mul_expr(te::Expr a, te::Expr b) {
  return a * b;
}
te::Expr div_expr(te::Expr a, te::Expr b) {
  const bool checked = is_integer(a.dtype());
  return te::binary(te::BinaryOp::div, std::move(a), std::move(b), checked);
}
te::Expr power_expr(te::Expr a, te::Expr b) {
  const bool checked = is_integer(a.dtype());
  return te::binary(te::BinaryOp::pow, std::move(a), std::move(b), checked);
}
template <te::BinaryOp kOp>
te::Expr binary_expr(te::Expr a, te::Expr b) {
  return te::binary(kOp, std::move(a), std::move(b));
}

std::vector<te::Tensor> where_rule(std::span<const te::Tensor> inputs, const ir::Attrs&) {
  TeBroadcast shape = broadcast_shapes(inputs.first(3), kWhereArgs);
  return {te::compute(
      shape.shape, "where",
      [&](std::span<const te::Var> i) {
        return te::select(load_broadcast(inputs[0], i, shape.shape),
                          load_broadcast(inputs[1], i, shape.shape),
                          load_broadcast(inputs[2], i, shape.shape));
      },
      std::move(shape.checks))};
}

}  // namespace

const OpDef& add() {
  static const OpDef def{.name = "add",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &arithmetic<&add>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&add, &add_expr>,
                         .reference = &add_kernel,
                         .summary = "a + b.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "add(%a, %b)"}};
  return def;
}

const OpDef& sub() {
  static const OpDef def{.name = "sub",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &arithmetic<&sub>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&sub, &sub_expr>,
                         .reference = &sub_kernel,
                         .summary = "a - b.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "sub(%a, %b)"}};
  return def;
}

const OpDef& mul() {
  static const OpDef def{.name = "mul",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &arithmetic<&mul>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&mul, &mul_expr>,
                         .reference = &mul_kernel,
                         .summary = "a * b.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "mul(%a, %b)"}};
  return def;
}

const OpDef& div() {
  static const OpDef def{.name = "div",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &arithmetic<&div>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&div, &div_expr>,
                         .reference = &div_kernel,
                         .summary = "a / b (an integer division by zero is an Error).",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "div(%a, %b)"}};
  return def;
}

const OpDef& maximum() {
  static const OpDef def{.name = "maximum",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &arithmetic<&maximum>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&maximum, &binary_expr<te::BinaryOp::maximum>>,
                         .reference = &extremum_kernel<true>,
                         .summary = "The larger of a and b (NaN wins).",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "maximum(%a, %b)"}};
  return def;
}

const OpDef& minimum() {
  static const OpDef def{.name = "minimum",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &arithmetic<&minimum>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&minimum, &binary_expr<te::BinaryOp::minimum>>,
                         .reference = &extremum_kernel<false>,
                         .summary = "The smaller of a and b (NaN wins).",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "minimum(%a, %b)"}};
  return def;
}

const OpDef& power() {
  static const OpDef def{.name = "power",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &arithmetic<&power>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&power, &power_expr>,
                         .reference = &power_kernel,
                         .summary = "a ^ b.",
                         .example = {"%a: f32[n, 4], %b: f32[]", "power(%a, %b)"}};
  return def;
}

const OpDef& equal() {
  static const OpDef def{.name = "equal",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&equal>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&equal, &binary_expr<te::BinaryOp::eq>>,
                         .reference = &comparison_kernel<std::equal_to<>>,
                         .summary = "a == b, as bool.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "equal(%a, %b)"}};
  return def;
}

const OpDef& not_equal() {
  static const OpDef def{.name = "not_equal",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&not_equal>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&not_equal, &binary_expr<te::BinaryOp::ne>>,
                         .reference = &comparison_kernel<std::not_equal_to<>>,
                         .summary = "a != b, as bool.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "not_equal(%a, %b)"}};
  return def;
}

const OpDef& less() {
  static const OpDef def{.name = "less",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&less>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&less, &binary_expr<te::BinaryOp::lt>>,
                         .reference = &comparison_kernel<std::less<>>,
                         .summary = "a < b, as bool.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "less(%a, %b)"}};
  return def;
}

const OpDef& less_equal() {
  static const OpDef def{.name = "less_equal",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&less_equal>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&less_equal, &binary_expr<te::BinaryOp::le>>,
                         .reference = &comparison_kernel<std::less_equal<>>,
                         .summary = "a <= b, as bool.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "less_equal(%a, %b)"}};
  return def;
}

const OpDef& greater() {
  static const OpDef def{.name = "greater",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&greater>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&greater, &binary_expr<te::BinaryOp::gt>>,
                         .reference = &comparison_kernel<std::greater<>>,
                         .summary = "a > b, as bool.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "greater(%a, %b)"}};
  return def;
}

const OpDef& greater_equal() {
  static const OpDef def{.name = "greater_equal",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&greater_equal>,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &binary_rule<&greater_equal, &binary_expr<te::BinaryOp::ge>>,
                         .reference = &comparison_kernel<std::greater_equal<>>,
                         .summary = "a >= b, as bool.",
                         .example = {"%a: f32[n, 4], %b: f32[4]", "greater_equal(%a, %b)"}};
  return def;
}

const OpDef& logical_and() {
  static const OpDef def{
      .name = "logical_and",
      .arg_names = kAB,
      .attrs = {},
      .type_relation = &logical<&logical_and>,
      .pattern = ir::OpPattern::broadcast,
      .compute = &binary_rule<&logical_and, &binary_expr<te::BinaryOp::logical_and>>,
      .reference = &logical_and_kernel,
      .summary = "a and b, of bool tensors.",
      .example = {"%a: bool[n, 4], %b: bool[4]", "logical_and(%a, %b)"}};
  return def;
}

const OpDef& logical_or() {
  static const OpDef def{
      .name = "logical_or",
      .arg_names = kAB,
      .attrs = {},
      .type_relation = &logical<&logical_or>,
      .pattern = ir::OpPattern::broadcast,
      .compute = &binary_rule<&logical_or, &binary_expr<te::BinaryOp::logical_or>>,
      .reference = &logical_or_kernel,
      .summary = "a or b, of bool tensors.",
      .example = {"%a: bool[n, 4], %b: bool[4]", "logical_or(%a, %b)"}};
  return def;
}

const OpDef& where() {
  static const OpDef def{.name = "where",
                         .arg_names = kWhereArgs,
                         .attrs = {},
                         .type_relation = &where_relation,
                         .pattern = ir::OpPattern::broadcast,
                         .compute = &where_rule,
                         .reference = &where_kernel,
                         .summary = "x where cond holds, else y; all three broadcast.",
                         .example = {"%cond: bool[n, 4], %x: f32[n, 4], %y: f32[]",
                                     "where(%cond, %x, %y)"}};
  return def;
}

}  // namespace nimble::ops
