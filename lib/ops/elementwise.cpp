// Elementwise unary ops: (x) -> x's type. Float dtypes only, except neg and
// abs (any numeric dtype), cast (any dtype) and logical_not (bool).
//
// Reference semantics (the arithmetic rules of reference_util.hpp apply):
//  - floating ops compute in double and round once: exp, log, log1p, sqrt, rsqrt
//    (1/sqrt), tanh, erf; sigmoid is 1/(1+exp(-x)) for x >= 0 and
//    exp(x)/(1+exp(x)) below, so that neither overflows; relu is max(x, 0)
//    with NaN kept (as PyTorch); gelu is the erf form 0.5·x·(1+erf(x/√2));
//    softplus is log(1+exp(x)) as max(x, 0) + log1p(exp(-|x|)).
//    IEEE results otherwise: log(0) = -inf, log(-1) = NaN, sqrt(-1) = NaN,
//    log1p(-1) = -inf, log1p(-2) = NaN.
//  - neg and abs on integers wrap: neg(INT_MIN) = abs(INT_MIN) = INT_MIN (as PyTorch).
//  - cast: floating to integer truncates toward zero and saturates (NaN -> 0,
//    out of range and ±inf -> the nearest limit); integer to integer wraps;
//    anything to bool is x != 0 (NaN is true); bool is 0 or 1.
//  - logical_not on bool.
//
// Compute rules (pattern elementwise): out[i] = f(x[i]) with f the te
// operation of the same semantics (te::sigmoid is the overflow-free form,
// te::cast the cast op's conversion); relu is select(x < 0, 0, x), which
// keeps NaN, gelu is written out in its erf form and softplus in its
// overflow-free one.
//
// Each floating-point op's reference, rule and OpDef sit together, at the
// end; docs/adding-an-op.md adds one.
#include <algorithm>
#include <cmath>

#include "ops/compute.hpp"
#include "ops/ops.hpp"
#include "ops/reference_util.hpp"
#include "ops/relation_util.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kX[] = {"x"};

template <const OpDef& (*Op)()>
Type floating_unary(std::span<const Type> args, const ir::Attrs&) {
  expect_floating(expect_tensor(args, 0, Op()), "x");
  return args[0];
}

template <const OpDef& (*Op)()>
Type numeric_unary(std::span<const Type> args, const ir::Attrs&) {
  expect_numeric(expect_tensor(args, 0, Op()), "x");
  return args[0];
}

Type cast_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, cast());
  return ir::tensor_type(x.shape, dtype_attr(cast(), attrs, "dtype"));
}

Type logical_not_relation(std::span<const Type> args, const ir::Attrs&) {
  expect_dtype(expect_tensor(args, 0, logical_not()), "x", DType::boolean);
  return args[0];
}

// --- reference kernels ------------------------------------------------------------------

// y = f(x) per element, for `x` of a type `kAccepts` allows; `f` is called
// with the element (typed) and returns the result element.
template <ref::Accepts kAccepts, class Fn>
Value map_unary(std::span<const Value> args, Fn f) {
  const Tensor& x = ref::tensor_arg(args, 0);
  Tensor y = ref::fresh(x.shape(), x.dtype());
  ref::dispatch<kAccepts>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) out[i] = f(in[i]);
  });
  return y;
}

// A floating-point op computed in double.
template <double (*F)(double)>
Value floating_kernel(std::span<const Value> args, const ir::Attrs&) {
  return map_unary<ref::Accepts::floating>(
      args, [](auto v) { return ref::from_double<decltype(v)>(F(to_double(v))); });
}

Value neg_kernel(std::span<const Value> args, const ir::Attrs&) {
  return map_unary<ref::Accepts::numeric>(args, [](auto v) {
    using T = decltype(v);
    if constexpr (ref::is_float_v<T>)
      return ref::from_double<T>(-to_double(v));
    else
      return ref::wrap<T>(0 - static_cast<std::uint64_t>(v));
  });
}

Value abs_kernel(std::span<const Value> args, const ir::Attrs&) {
  return map_unary<ref::Accepts::numeric>(args, [](auto v) {
    using T = decltype(v);
    if constexpr (ref::is_float_v<T>)
      return ref::from_double<T>(std::fabs(to_double(v)));
    else
      return v < 0 ? ref::wrap<T>(0 - static_cast<std::uint64_t>(v)) : v;
  });
}

Value logical_not_kernel(std::span<const Value> args, const ir::Attrs&) {
  return map_unary<ref::Accepts::boolean>(args, [](bool v) { return !v; });
}

Value cast_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const DType to = dtype_attr(cast(), attrs, "dtype");
  Tensor y = ref::fresh(x.shape(), to);
  ref::dispatch<ref::Accepts::any>(x.dtype(), "x", [&](auto from_tag) {
    using From = decltype(from_tag);
    ref::dispatch<ref::Accepts::any>(to, "dtype", [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* in = x.data<From>();
      To* out = y.data<To>();
      for (std::int64_t i = 0; i < x.numel(); ++i) out[i] = ref::convert<To>(in[i]);
    });
  });
  return y;
}

// --- compute rules ------------------------------------------------------------------------

// out[i] = F(x[i]) over x's shape.
template <const OpDef& (*Op)(), te::Expr (*F)(te::Expr)>
std::vector<te::Tensor> unary_rule(std::span<const te::Tensor> inputs, const ir::Attrs&) {
  const te::Tensor& x = inputs[0];
  return {te::compute(x.shape(), std::string(Op().name),
                      [&](std::span<const te::Var> i) { return F(x(te::as_indices(i))); })};
}

std::vector<te::Tensor> cast_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const DType to = dtype_attr(cast(), attrs, "dtype");
  return {te::compute(x.shape(), "cast", [&](std::span<const te::Var> i) {
    return te::cast(to, x(te::as_indices(i)));
  })};
}

// A floating-point element-wise op: the reference computes `Ref` in double
// and rounds once, the rule is `Rule` over te expressions, and the tests
// draw x from `inputs` (ir::InputRange).
template <const OpDef& (*Op)(), double (*Ref)(double), te::Expr (*Rule)(te::Expr)>
OpDef floating_op(std::string_view name, std::string_view summary, ir::OpExample example,
                  ir::InputRange inputs = {}) {
  return {.name = name,
          .arg_names = kX,
          .attrs = {},
          .type_relation = &floating_unary<Op>,
          .pattern = ir::OpPattern::elementwise,
          .compute = &unary_rule<Op, Rule>,
          .reference = &floating_kernel<Ref>,
          .float_inputs = inputs,
          .summary = summary,
          .example = example};
}

}  // namespace

const OpDef& neg() {
  static const OpDef def{.name = "neg",
                         .arg_names = kX,
                         .attrs = {},
                         .type_relation = &numeric_unary<&neg>,
                         .pattern = ir::OpPattern::elementwise,
                         .compute = &unary_rule<&neg, &te::neg>,
                         .reference = &neg_kernel,
                         .summary = "-x.",
                         .example = {"%x: f32[n, 4]", "neg(%x)"}};
  return def;
}

const OpDef& abs() {
  static const OpDef def{.name = "abs",
                         .arg_names = kX,
                         .attrs = {},
                         .type_relation = &numeric_unary<&abs>,
                         .pattern = ir::OpPattern::elementwise,
                         .compute = &unary_rule<&abs, &te::abs>,
                         .reference = &abs_kernel,
                         .summary = "|x|.",
                         .example = {"%x: i32[n, 4]", "abs(%x)"}};
  return def;
}

const OpDef& cast() {
  static const ir::AttrSpec attrs[] = {{"dtype", ir::AttrKind::dtype, std::nullopt}};
  static const OpDef def{.name = "cast",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &cast_relation,
                         .pattern = ir::OpPattern::elementwise,
                         .compute = &cast_rule,
                         .reference = &cast_kernel,
                         .summary = "x converted to `dtype`.",
                         .example = {"%x: f32[n, 4]", "cast(%x, dtype=i32)"}};
  return def;
}

const OpDef& logical_not() {
  static const OpDef def{.name = "logical_not",
                         .arg_names = kX,
                         .attrs = {},
                         .type_relation = &logical_not_relation,
                         .pattern = ir::OpPattern::elementwise,
                         .compute = &unary_rule<&logical_not, &te::logical_not>,
                         .reference = &logical_not_kernel,
                         .summary = "Logical not of a bool tensor.",
                         .example = {"%x: bool[n, 4]", "logical_not(%x)"}};
  return def;
}

// --- floating-point ops, each with its reference and its rule ----------------------------
// (static: private to this file, beside the op they belong to)

static double exp_fn(double x) { return std::exp(x); }
const OpDef& exp() {
  static const OpDef def =
      floating_op<&exp, &exp_fn, &te::exp>("exp", "e^x.", {"%x: f32[n, 4]", "exp(%x)"});
  return def;
}

static double log_fn(double x) {
  return std::log(x);
}
const OpDef& log() {
  static const OpDef def =
      floating_op<&log, &log_fn, &te::log>("log", "The natural logarithm (NaN below 0, -inf at 0).",
                                           {"%x: f32[n, 4]", "log(%x)"}, {.lo = -1, .hi = 10});
  return def;
}

static double log1p_fn(double x) {
  return std::log1p(x);
}
const OpDef& log1p() {
  static const OpDef def = floating_op<&log1p, &log1p_fn, &te::log1p>(
      "log1p", "log(1 + x), accurate where x is tiny.", {"%x: f32[n, 4]", "log1p(%x)"},
      {.lo = -1, .hi = 10});
  return def;
}

static double sqrt_fn(double x) {
  return std::sqrt(x);
}
const OpDef& sqrt() {
  static const OpDef def =
      floating_op<&sqrt, &sqrt_fn, &te::sqrt>("sqrt", "The square root (NaN below 0).",
                                              {"%x: f32[n, 4]", "sqrt(%x)"}, {.lo = -1, .hi = 10});
  return def;
}

static double rsqrt_fn(double x) {
  return 1.0 / std::sqrt(x);
}
const OpDef& rsqrt() {
  static const OpDef def = floating_op<&rsqrt, &rsqrt_fn, &te::rsqrt>(
      "rsqrt", "1 / sqrt(x).", {"%x: f32[n, 4]", "rsqrt(%x)"}, {.lo = -1, .hi = 10});
  return def;
}

static double tanh_fn(double x) {
  return std::tanh(x);
}
const OpDef& tanh() {
  static const OpDef def = floating_op<&tanh, &tanh_fn, &te::tanh>(
      "tanh", "The hyperbolic tangent.", {"%x: f32[n, 4]", "tanh(%x)"});
  return def;
}

static double sigmoid_fn(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);  // x < 0 (or NaN): e <= 1, no overflow
  return e / (1.0 + e);
}
const OpDef& sigmoid() {
  static const OpDef def = floating_op<&sigmoid, &sigmoid_fn, &te::sigmoid>(
      "sigmoid", "1 / (1 + e^-x).", {"%x: f32[n, 4]", "sigmoid(%x)"});
  return def;
}

static double relu_fn(double x) {
  return x < 0 ? 0.0 : x;
}  // NaN stays NaN
static te::Expr relu_expr(te::Expr x) {
  const te::Expr zero = te::constant(x.dtype(), 0);
  return te::select(x < 0, zero, x);  // NaN < 0 is false: NaN stays
}
const OpDef& relu() {
  static const OpDef def =
      floating_op<&relu, &relu_fn, &relu_expr>("relu", "max(x, 0).", {"%x: f32[n, 4]", "relu(%x)"});
  return def;
}

static double gelu_fn(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
// Below f64, x/√2 as x·(1/√2): a multiply, not a division (a 16-lane
// division issues once every 10-16 cycles on AVX-512, much of GELU's time:
// over [200, 768] 0.105 -> 0.095-0.101 ms). The rounded reciprocal errs as
// much as the rounded √2 (2^-25 relative), the product as the quotient. f64
// divides as the reference does: 1 + erf cancels for x well below 0, and
// the reference's own quotient is what the result must match.
static te::Expr gelu_expr(te::Expr x) {
  const te::Expr t = x.dtype() == DType::f64 ? x / std::sqrt(2.0) : x * (1.0 / std::sqrt(2.0));
  return 0.5 * x * (1.0 + te::erf(t));
}
const OpDef& gelu() {
  static const OpDef def = floating_op<&gelu, &gelu_fn, &gelu_expr>(
      "gelu", "x * Phi(x), in the erf form.", {"%x: f32[n, 4]", "gelu(%x)"});
  return def;
}

static double erf_fn(double x) {
  return std::erf(x);
}
const OpDef& erf() {
  static const OpDef def = floating_op<&erf, &erf_fn, &te::erf>("erf", "The error function.",
                                                                {"%x: f32[n, 4]", "erf(%x)"});
  return def;
}

// softplus(x) = log(1 + exp(x)), as max(x, 0) + log1p(exp(-|x|)): exp
// never overflows, for large |x| the log term vanishes (x, or 0) instead of
// log(inf), and log1p keeps the small results far below 0 accurate. NaN
// stays NaN.
static double softplus_fn(double x) {
  return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
}
static te::Expr softplus_expr(te::Expr x) {
  const te::Expr zero = te::constant(x.dtype(), 0);
  return te::select(x < 0, zero, x) + te::log1p(te::exp(-te::abs(x)));
}
const OpDef& softplus() {
  static const OpDef def = floating_op<&softplus, &softplus_fn, &softplus_expr>(
      "softplus", "log(1 + e^x), computed without overflow.", {"%x: f32[n, 4]", "softplus(%x)"},
      {.lo = -30, .hi = 30});
  return def;
}

}  // namespace nimble::ops
