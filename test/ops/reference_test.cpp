// The reference implementation of every op (OpDef::reference, the oracle of
// every compiled kernel) against naive loops written here in double, on
// random shapes with dims of 0 and 1 and broadcasting edge cases, and every
// semantic rule and error message the op families' headers state.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "nimble/runtime/value.hpp"
#include "ops/ops.hpp"
#include "runtime/element.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::epsilon;
using nimble::testing::IsCloseTo;
using Ints = std::vector<std::int64_t>;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// --- naive arrays ------------------------------------------------------------------------

/// A row-major array of doubles: what the naive implementations compute on.
struct Array {
  Ints shape;
  std::vector<double> data;
};

std::int64_t count(const Ints& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

Ints unravel(std::int64_t flat, const Ints& shape) {
  Ints index(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

std::int64_t ravel(const Ints& index, const Ints& shape) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

Shape to_shape(const Ints& dims) {
  return Shape(std::span<const std::int64_t>(dims));
}

Array to_array(const Tensor& t) {
  Array a{Ints(t.shape().begin(), t.shape().end()), {}};
  for (std::int64_t i = 0; i < t.numel(); ++i) a.data.push_back(t.element_as_double(i));
  return a;
}

/// A tensor of `dtype` holding `values` (each representable in dtype).
Tensor to_tensor(const Ints& shape, const std::vector<double>& values, DType dtype) {
  Tensor t = Tensor::empty(to_shape(shape), dtype);
  REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
  auto* base = static_cast<std::byte*>(t.raw_data());
  for (std::size_t i = 0; i < values.size(); ++i)
    store_from_double(base + i * dtype_size(dtype), dtype, values[i]);
  return t;
}

Tensor to_tensor(const Array& a, DType dtype) {
  return to_tensor(a.shape, a.data, dtype);
}

/// `v` (an integer) wrapped to integer `dtype` as two's complement.
double wrap_to(DType dtype, double v) {
  const auto i = static_cast<std::int64_t>(v);
  switch (dtype) {
    case DType::i8:
      return static_cast<std::int8_t>(i);
    case DType::i32:
      return static_cast<std::int32_t>(i);
    default:
      return static_cast<double>(i);
  }
}

// --- random inputs -------------------------------------------------------------------------

std::int64_t random_dim(std::mt19937& rng) {
  static constexpr std::int64_t dims[] = {0, 1, 1, 2, 2, 3, 3, 4, 5, 1};
  return dims[std::uniform_int_distribution<std::size_t>(0, std::size(dims) - 1)(rng)];
}

Ints random_shape(std::mt19937& rng, std::size_t max_rank = 4) {
  const auto rank = std::uniform_int_distribution<std::size_t>(0, max_rank)(rng);
  Ints shape;
  for (std::size_t i = 0; i < rank; ++i) shape.push_back(random_dim(rng));
  return shape;
}

bool coin(std::mt19937& rng, double p = 0.5) {
  return std::bernoulli_distribution(p)(rng);
}

/// Random values in [lo, hi]; integers and bool are whole.
Tensor random_tensor(const Ints& shape, DType dtype, std::mt19937& rng, double lo = -3,
                     double hi = 3) {
  std::vector<double> values;
  for (std::int64_t i = 0; i < count(shape); ++i) {
    if (dtype == DType::boolean)
      values.push_back(coin(rng) ? 1 : 0);
    else if (is_integer(dtype))
      values.push_back(static_cast<double>(std::uniform_int_distribution<std::int64_t>(
          static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi))(rng)));
    else
      values.push_back(std::uniform_real_distribution<double>(lo, hi)(rng));
  }
  return to_tensor(shape, values, dtype);
}

/// Shapes a and b whose broadcast is a random shape: dims replaced by 1 on
/// either side, leading dims dropped from one of them.
std::pair<Ints, Ints> broadcast_pair(std::mt19937& rng) {
  const Ints out = random_shape(rng);
  Ints a = out, b = out;
  for (std::size_t d = 0; d < out.size(); ++d) {
    if (coin(rng, 0.25))
      a[d] = 1;
    else if (coin(rng, 0.25))
      b[d] = 1;
  }
  Ints& shorter = coin(rng) ? a : b;
  const auto drop = std::uniform_int_distribution<std::size_t>(0, shorter.size())(rng);
  shorter.erase(shorter.begin(), shorter.begin() + static_cast<std::ptrdiff_t>(drop));
  return {a, b};
}

Ints broadcast_naive(const std::vector<Ints>& shapes) {
  std::size_t rank = 0;
  for (const Ints& s : shapes) rank = std::max(rank, s.size());
  Ints out(rank, 1);
  for (const Ints& s : shapes)
    for (std::size_t k = 0; k < s.size(); ++k)
      if (s[k] != 1) out[k + rank - s.size()] = s[k];
  return out;
}

/// The element of `a` that broadcasts to `index` of a rank-`index.size()` result.
double at_broadcast(const Array& a, const Ints& index) {
  const std::size_t offset = index.size() - a.shape.size();
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < a.shape.size(); ++d)
    flat = flat * a.shape[d] + (a.shape[d] == 1 ? 0 : index[offset + d]);
  return a.data[static_cast<std::size_t>(flat)];
}

// --- tolerances -------------------------------------------------------------------------------

/// A few ulps (exact for integers and bool); NaN matches NaN.
Tolerance ulps(DType t, double n = 4) {
  return {.rtol = n * epsilon(t), .atol = is_floating(t) ? 1e-300 : 0.0, .equal_nan = true};
}

/// Σ|x|·n·ε for a reduction of `n` elements whose absolute sum is at most `sum_abs`.
Tolerance reduction_tolerance(DType t, double sum_abs, double n) {
  return {.rtol = 4 * epsilon(t),
          .atol = sum_abs * std::max(n, 1.0) * epsilon(t) + 1e-300,
          .equal_nan = true};
}

// --- calling ops ---------------------------------------------------------------------------

ir::Type type_of(const Value& v) {
  if (v.is_tensor()) {
    std::vector<ir::Dim> dims;
    for (std::int64_t d : v.tensor().shape()) dims.emplace_back(d);
    return ir::tensor_type(std::move(dims), v.tensor().dtype());
  }
  std::vector<ir::Type> fields;
  for (const Value& f : v.fields()) fields.push_back(type_of(f));
  return ir::tuple_type(std::move(fields));
}

/// The op's reference implementation applied to `args`.
Value call(const ir::OpDef& op, std::vector<Value> args, const ir::Attrs& attrs = {}) {
  REQUIRE(op.reference != nullptr);
  return op.reference(args, attrs);
}

/// As call(), also checking that the result has the type the op's type
/// relation gives for the (static) types of the arguments.
Value run(const ir::OpDef& op, std::vector<Value> args, const ir::Attrs& attrs = {}) {
  std::vector<ir::Type> types;
  for (const Value& a : args) types.push_back(type_of(a));
  const std::string expected = ir::to_string(op.type_relation(types, attrs));
  Value result = call(op, std::move(args), attrs);
  CHECK(ir::to_string(type_of(result)) == expected);
  return result;
}

Tensor run_tensor(const ir::OpDef& op, std::vector<Value> args, const ir::Attrs& attrs = {}) {
  return run(op, std::move(args), attrs).tensor();
}

/// For ops whose result extents are Any in their type (data-dependent).
Tensor call_tensor(const ir::OpDef& op, std::vector<Value> args, const ir::Attrs& attrs = {}) {
  return call(op, std::move(args), attrs).tensor();
}

Tensor f32(const Ints& shape, const std::vector<double>& values) {
  return to_tensor(shape, values, DType::f32);
}
Tensor i32(const Ints& shape, const std::vector<double>& values) {
  return to_tensor(shape, values, DType::i32);
}
Tensor i64(const Ints& shape, const std::vector<double>& values) {
  return to_tensor(shape, values, DType::i64);
}
Tensor boolean(const Ints& shape, const std::vector<double>& values) {
  return to_tensor(shape, values, DType::boolean);
}

Value make_list(const std::vector<Tensor>& elements) {
  Value list = Value::adt(0, {});
  for (auto it = elements.rbegin(); it != elements.rend(); ++it)
    list = Value::adt(1, {Value(*it), list});
  return list;
}

constexpr DType kFloatTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

// --- registry -------------------------------------------------------------------------------

TEST_CASE("reference: every op has a reference implementation", "[ops]") {
  for (const ir::OpDef* op : ir::all_ops()) {
    INFO(op->name);
    CHECK(op->reference != nullptr);
  }
}

// --- elementwise unary -------------------------------------------------------------------------

TEST_CASE("reference: unary floating ops match naive loops on every float dtype", "[ops]") {
  struct Case {
    const ir::OpDef& op;
    double lo, hi;
    std::function<double(double)> f;
  };
  const Case cases[] = {
      {ops::exp(), -5, 5, [](double x) { return std::exp(x); }},
      {ops::log(), 0.01, 10, [](double x) { return std::log(x); }},
      {ops::log1p(), -0.99, 10, [](double x) { return std::log1p(x); }},
      {ops::sqrt(), 0, 10, [](double x) { return std::sqrt(x); }},
      {ops::rsqrt(), 0.01, 10, [](double x) { return 1 / std::sqrt(x); }},
      {ops::tanh(), -4, 4, [](double x) { return std::tanh(x); }},
      {ops::sigmoid(), -8, 8, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {ops::relu(), -3, 3, [](double x) { return x > 0 ? x : 0.0; }},
      {ops::gelu(), -4, 4, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {ops::erf(), -3, 3, [](double x) { return std::erf(x); }},
      {ops::softplus(), -20, 20, [](double x) { return std::log1p(std::exp(x)); }},
      {ops::neg(), -3, 3, [](double x) { return -x; }},
      {ops::abs(), -3, 3, [](double x) { return std::fabs(x); }},
  };
  std::mt19937 rng(1);
  for (const Case& c : cases) {
    for (DType dtype : kFloatTypes) {
      for (int trial = 0; trial < 6; ++trial) {
        const Ints shape = random_shape(rng);
        const Tensor x = random_tensor(shape, dtype, rng, c.lo, c.hi);
        Array expected = to_array(x);
        for (double& v : expected.data) v = c.f(v);
        INFO(c.op.name << " " << to_string(dtype) << " " << to_string(x.shape()));
        CHECK_THAT(run_tensor(c.op, {x}), IsCloseTo(to_tensor(expected, dtype), ulps(dtype)));
      }
    }
  }
}

TEST_CASE("reference: unary ops follow IEEE and PyTorch on special values", "[ops]") {
  const Tensor x = f32({5}, {kNaN, -kInf, kInf, -0.5, 0});
  CHECK_THAT(run_tensor(ops::relu(), {x}),
             IsCloseTo(f32({5}, {kNaN, 0, kInf, 0, 0}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::exp(), {x}),
             IsCloseTo(f32({5}, {kNaN, 0, kInf, std::exp(-0.5), 1}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::log(), {x}),
             IsCloseTo(f32({5}, {kNaN, kNaN, kInf, kNaN, -kInf}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::sqrt(), {x}),
             IsCloseTo(f32({5}, {kNaN, kNaN, kInf, kNaN, 0}), ulps(DType::f32)));
  // sigmoid never overflows: exp(1000) is inf, but sigmoid(±1000) is exact.
  CHECK_THAT(run_tensor(ops::sigmoid(), {to_tensor({4}, {-1000, 1000, -kInf, kInf}, DType::f64)}),
             IsCloseTo(to_tensor({4}, {0, 1, 0, 1}, DType::f64), ulps(DType::f64)));
  CHECK_THAT(run_tensor(ops::sigmoid(), {f32({1}, {kNaN})}),
             IsCloseTo(f32({1}, {kNaN}), ulps(DType::f32)));
  // gelu is the erf form, not the tanh approximation.
  CHECK_THAT(run_tensor(ops::gelu(), {to_tensor({2}, {1, -1}, DType::f64)}),
             IsCloseTo(to_tensor({2}, {0.8413447460685429, -0.15865525393145707}, DType::f64),
                       ulps(DType::f64)));
  CHECK_THAT(run_tensor(ops::gelu(), {f32({1}, {3})}),
             IsCloseTo(f32({1}, {2.99595030590511}), ulps(DType::f32)));
}

TEST_CASE("reference: log1p keeps the digits of tiny x that log(1 + x) loses", "[ops]") {
  // In f32, 1 + 1e-8 is 1: log(1 + x) gives 0, log1p gives x (to a rounding).
  const Tensor tiny = f32({3}, {1e-8f, -3e-9f, 1e-30f});
  CHECK_THAT(run_tensor(ops::log1p(), {tiny}), IsCloseTo(f32({3}, {1e-8f, -3e-9f, 1e-30f}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::log1p(), {f32({6}, {-1, -2, kInf, -kInf, kNaN, -0.0f})}),
             IsCloseTo(f32({6}, {-kInf, kNaN, kInf, kNaN, kNaN, -0.0f}), ulps(DType::f32)));
}

TEST_CASE("reference: softplus is log(1 + exp(x)) and never overflows", "[ops]") {
  // log(1 + exp(1000)) would be log(inf); softplus(x) is x there, exp(x) far
  // below 0, log(2) at 0; NaN stays NaN and the infinities give inf and 0.
  const Tensor x = to_tensor({8}, {-1000, -30, -1, 0, 1, 30, 1000, kNaN}, DType::f64);
  CHECK_THAT(run_tensor(ops::softplus(), {x}),
             IsCloseTo(to_tensor({8},
                                 {0, std::log1p(std::exp(-30.0)), std::log1p(std::exp(-1.0)), std::log(2.0),
                                  1 + std::log1p(std::exp(-1.0)), 30 + std::exp(-30.0), 1000, kNaN},
                                 DType::f64),
                       ulps(DType::f64)));
  CHECK_THAT(run_tensor(ops::softplus(), {f32({2}, {-kInf, kInf})}),
             IsCloseTo(f32({2}, {0, kInf}), ulps(DType::f32)));
}

TEST_CASE("reference: neg and abs on integers wrap like PyTorch", "[ops]") {
  std::mt19937 rng(2);
  for (DType dtype : {DType::i8, DType::i32, DType::i64}) {
    const Tensor x = random_tensor({3, 4}, dtype, rng, -100, 100);
    Array neg = to_array(x), abs = to_array(x);
    for (double& v : neg.data) v = -v;
    for (double& v : abs.data) v = std::fabs(v);
    CHECK_THAT(run_tensor(ops::neg(), {x}), IsCloseTo(to_tensor(neg, dtype), ulps(dtype)));
    CHECK_THAT(run_tensor(ops::abs(), {x}), IsCloseTo(to_tensor(abs, dtype), ulps(dtype)));
  }
  const Tensor min8 = to_tensor({2}, {-128, 127}, DType::i8);
  CHECK_THAT(run_tensor(ops::neg(), {min8}), IsCloseTo(to_tensor({2}, {-128, -127}, DType::i8)));
  CHECK_THAT(run_tensor(ops::abs(), {min8}), IsCloseTo(to_tensor({2}, {-128, 127}, DType::i8)));
  const auto min64 = std::numeric_limits<std::int64_t>::min();
  const Tensor big = Tensor::from_data<std::int64_t>({1}, {min64});
  CHECK(run_tensor(ops::neg(), {big}).values<std::int64_t>()[0] == min64);
}

TEST_CASE("reference: cast truncates, saturates and wraps as stated", "[ops]") {
  const auto cast_to = [](const Tensor& x, DType dtype) {
    return run_tensor(ops::cast(), {x}, {{"dtype", dtype}});
  };
  const Tensor x = f32({8}, {2.7, -2.7, kNaN, 1e10, -1e10, kInf, -kInf, -0.0});
  CHECK_THAT(
      cast_to(x, DType::i32),
      IsCloseTo(i32({8}, {2, -2, 0, 2147483647, -2147483648.0, 2147483647, -2147483648.0, 0})));
  CHECK_THAT(cast_to(x, DType::i8),
             IsCloseTo(to_tensor({8}, {2, -2, 0, 127, -128, 127, -128, 0}, DType::i8)));
  CHECK(cast_to(x, DType::i64).values<std::int64_t>()[3] == 10000000000);
  CHECK(cast_to(x, DType::i64).values<std::int64_t>()[5] ==
        std::numeric_limits<std::int64_t>::max());
  CHECK_THAT(cast_to(x, DType::boolean), IsCloseTo(boolean({8}, {1, 1, 1, 1, 1, 1, 1, 0})));
  CHECK_THAT(cast_to(i32({3}, {300, -129, 127}), DType::i8),
             IsCloseTo(to_tensor({3}, {44, 127, 127}, DType::i8)));
  CHECK_THAT(cast_to(boolean({2}, {1, 0}), DType::f16),
             IsCloseTo(to_tensor({2}, {1, 0}, DType::f16)));
  CHECK_THAT(cast_to(to_tensor({2}, {1.0 / 3, 65504}, DType::f64), DType::f16),
             IsCloseTo(to_tensor({2}, {1.0 / 3, 65504}, DType::f16), ulps(DType::f16, 0.5)));

  // Every pair of dtypes on values every dtype holds exactly.
  std::mt19937 rng(3);
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      const Tensor in = random_tensor(random_shape(rng, 3), from, rng, -100, 100);
      Array expected = to_array(in);
      if (to == DType::boolean)
        for (double& v : expected.data) v = v != 0;
      INFO(to_string(from) << " -> " << to_string(to));
      CHECK_THAT(cast_to(in, to), IsCloseTo(to_tensor(expected, to), ulps(to)));
    }
  }
}

TEST_CASE("reference: logical_not negates bool tensors", "[ops]") {
  CHECK_THAT(run_tensor(ops::logical_not(), {boolean({2, 2}, {1, 0, 0, 1})}),
             IsCloseTo(boolean({2, 2}, {0, 1, 1, 0})));
  CHECK(run_tensor(ops::logical_not(), {boolean({0, 3}, {})}).shape() == Shape{0, 3});
}

// --- binary ------------------------------------------------------------------------------------

namespace {

/// The naive broadcast of f over a and b.
Array naive_binary(const Array& a, const Array& b, const std::function<double(double, double)>& f) {
  Array out{broadcast_naive({a.shape, b.shape}), {}};
  for (std::int64_t i = 0; i < count(out.shape); ++i) {
    const Ints index = unravel(i, out.shape);
    out.data.push_back(f(at_broadcast(a, index), at_broadcast(b, index)));
  }
  return out;
}

}  // namespace

TEST_CASE("reference: binary arithmetic broadcasts like numpy on every numeric dtype", "[ops]") {
  struct Case {
    const ir::OpDef& op;
    std::function<double(double, double)> f;
  };
  const Case cases[] = {
      {ops::add(), std::plus<>()},
      {ops::sub(), std::minus<>()},
      {ops::mul(), std::multiplies<>()},
      {ops::div(), [](double x, double y) { return x / y; }},
      {ops::maximum(), [](double x, double y) { return std::max(x, y); }},
      {ops::minimum(), [](double x, double y) { return std::min(x, y); }},
      {ops::power(), [](double x, double y) { return std::pow(x, y); }},
  };
  std::mt19937 rng(4);
  for (const Case& c : cases) {
    for (DType dtype :
         {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::i32, DType::i64}) {
      for (int trial = 0; trial < 8; ++trial) {
        const auto [sa, sb] = broadcast_pair(rng);
        const bool is_pow = &c.op == &ops::power();
        const bool is_div = &c.op == &ops::div();
        Tensor a = random_tensor(sa, dtype, rng, is_pow ? 0.5 : -20, is_pow ? 4 : 20);
        Tensor b = random_tensor(sb, dtype, rng, is_pow ? 0 : is_div ? 1 : -20, is_pow ? 3 : 20);
        if (is_div && coin(rng)) b = run_tensor(ops::neg(), {b});  // negative divisors too
        const bool integer = is_integer(dtype);
        Array expected = naive_binary(to_array(a), to_array(b), [&](double x, double y) {
          if (integer && is_div) return std::trunc(x / y);
          return c.f(x, y);
        });
        if (integer)
          for (double& v : expected.data) v = wrap_to(dtype, v);
        INFO(c.op.name << " " << to_string(dtype) << " " << to_string(a.shape()) << " "
                       << to_string(b.shape()));
        CHECK_THAT(run_tensor(c.op, {a, b}), IsCloseTo(to_tensor(expected, dtype), ulps(dtype)));
      }
    }
  }
}

TEST_CASE("reference: a run-time 1 broadcasts and a mismatch names both shapes", "[ops]") {
  const Tensor row = f32({1, 3}, {1, 2, 3});
  const Tensor col = f32({2, 1}, {10, 20});
  CHECK_THAT(run_tensor(ops::add(), {row, col}), IsCloseTo(f32({2, 3}, {11, 12, 13, 21, 22, 23})));
  CHECK_THAT(run_tensor(ops::mul(), {f32({}, {2}), col}), IsCloseTo(f32({2, 1}, {20, 40})));
  CHECK(run_tensor(ops::add(), {f32({0, 3}, {}), row}).shape() == Shape{0, 3});
  CHECK(run_tensor(ops::add(), {f32({1, 0}, {}), col}).shape() == Shape{2, 0});
  CHECK_NIMBLE_ERROR(
      call(ops::add(), {f32({2, 3}, std::vector<double>(6)), f32({4, 3}, std::vector<double>(12))}),
      ErrorKind::invalid_argument, "a [2, 3] and b [4, 3] do not broadcast: dim 0 is 2 vs 4");
  CHECK_NIMBLE_ERROR(
      call(ops::sub(),
           {f32({5, 2, 3}, std::vector<double>(30)), f32({4, 3}, std::vector<double>(12))}),
      ErrorKind::invalid_argument, "a [5, 2, 3] and b [4, 3] do not broadcast: dim 1 is 2 vs 4");
  CHECK_NIMBLE_ERROR(call(ops::less(), {f32({0}, {}), f32({2}, {1, 2})}),
                     ErrorKind::invalid_argument,
                     "a [0] and b [2] do not broadcast: dim 0 is 0 vs 2");
  CHECK_NIMBLE_ERROR(call(ops::where(), {boolean({3}, {1, 0, 1}), f32({1}, {1}), f32({2}, {1, 2})}),
                     ErrorKind::invalid_argument,
                     "cond [3] and y [2] do not broadcast: dim 0 is 3 vs 2");
  CHECK_NIMBLE_ERROR(call(ops::add(), {f32({1}, {1}), i32({1}, {1})}), ErrorKind::type_error,
                     "a is f32 but b is i32");
}

TEST_CASE("reference: integer division truncates toward zero and never traps", "[ops]") {
  for (DType dtype : {DType::i8, DType::i32, DType::i64}) {
    INFO(to_string(dtype));
    const Tensor a = to_tensor({4}, {7, -7, 7, -7}, dtype);
    const Tensor b = to_tensor({4}, {2, 2, -2, -2}, dtype);
    CHECK_THAT(run_tensor(ops::div(), {a, b}), IsCloseTo(to_tensor({4}, {3, -3, -3, 3}, dtype)));
    CHECK_NIMBLE_ERROR(
        call(ops::div(), {to_tensor({2, 2}, {1, 2, 3, 4}, dtype), to_tensor({2}, {1, 0}, dtype)}),
        ErrorKind::runtime_error, "integer division by zero at index [0, 1] of the result");
  }
  CHECK_NIMBLE_ERROR(call(ops::div(), {i32({2}, {-2147483648.0, 4}), i32({}, {-1})}),
                     ErrorKind::runtime_error,
                     "integer overflow: INT_MIN / -1 at index [0] of the result");
  CHECK_NIMBLE_ERROR(
      call(ops::div(), {to_tensor({1}, {-128}, DType::i8), to_tensor({1}, {-1}, DType::i8)}),
      ErrorKind::runtime_error, "integer overflow: INT_MIN / -1 at index [0] of the result");
  // Floating-point division by zero is IEEE.
  CHECK_THAT(run_tensor(ops::div(), {f32({3}, {1, -1, 0}), f32({}, {0})}),
             IsCloseTo(f32({3}, {kInf, -kInf, kNaN}), ulps(DType::f32)));
}

TEST_CASE("reference: integer add, sub, mul and power wrap; a negative exponent is an error",
          "[ops]") {
  const double max32 = 2147483647, min32 = -2147483648.0;
  CHECK_THAT(run_tensor(ops::add(), {i32({1}, {max32}), i32({1}, {1})}),
             IsCloseTo(i32({1}, {min32})));
  CHECK_THAT(run_tensor(ops::sub(), {i32({1}, {min32}), i32({1}, {1})}),
             IsCloseTo(i32({1}, {max32})));
  CHECK_THAT(
      run_tensor(ops::mul(), {to_tensor({1}, {16}, DType::i8), to_tensor({1}, {16}, DType::i8)}),
      IsCloseTo(to_tensor({1}, {0}, DType::i8)));
  CHECK_THAT(run_tensor(ops::power(), {i64({5}, {2, 3, -2, 0, 7}), i64({5}, {10, 3, 3, 0, 0})}),
             IsCloseTo(i64({5}, {1024, 27, -8, 1, 1})));
  CHECK_THAT(run_tensor(ops::power(),
                        {to_tensor({2}, {2, 3}, DType::i8), to_tensor({2}, {7, 5}, DType::i8)}),
             IsCloseTo(to_tensor({2}, {-128, -13}, DType::i8)));  // 243 wraps to -13
  CHECK(run_tensor(ops::power(), {Tensor::from_data<std::int64_t>({1}, {3}),
                                  Tensor::from_data<std::int64_t>({1}, {40})})
            .values<std::int64_t>()[0] == std::int64_t{-6289078614652622815});  // 3^40 modulo 2^64
  CHECK_NIMBLE_ERROR(call(ops::power(), {i32({2}, {2, 2}), i32({2}, {1, -2})}),
                     ErrorKind::runtime_error,
                     "negative exponent in integer power at index [1] of the result");
  CHECK_THAT(run_tensor(ops::power(), {f32({3}, {2, -8, 0}), f32({3}, {-1, 1.0 / 3, 0})}),
             IsCloseTo(f32({3}, {0.5, kNaN, 1}), ulps(DType::f32)));
}

TEST_CASE("reference: maximum and minimum propagate NaN", "[ops]") {
  const Tensor a = f32({4}, {kNaN, 1, kNaN, 3});
  const Tensor b = f32({4}, {1, kNaN, kNaN, -kInf});
  CHECK_THAT(run_tensor(ops::maximum(), {a, b}),
             IsCloseTo(f32({4}, {kNaN, kNaN, kNaN, 3}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::minimum(), {a, b}),
             IsCloseTo(f32({4}, {kNaN, kNaN, kNaN, -kInf}), ulps(DType::f32)));
}

TEST_CASE("reference: comparisons work on every dtype and are false with NaN", "[ops]") {
  struct Case {
    const ir::OpDef& op;
    std::function<bool(double, double)> f;
  };
  const Case cases[] = {
      {ops::equal(), std::equal_to<>()},  {ops::not_equal(), std::not_equal_to<>()},
      {ops::less(), std::less<>()},       {ops::less_equal(), std::less_equal<>()},
      {ops::greater(), std::greater<>()}, {ops::greater_equal(), std::greater_equal<>()}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    for (DType dtype : kAllDTypes) {
      for (int trial = 0; trial < 5; ++trial) {
        const auto [sa, sb] = broadcast_pair(rng);
        const Tensor a = random_tensor(sa, dtype, rng, -2, 2);
        const Tensor b = random_tensor(sb, dtype, rng, -2, 2);
        const Array expected = naive_binary(
            to_array(a), to_array(b), [&](double x, double y) { return c.f(x, y) ? 1.0 : 0.0; });
        INFO(c.op.name << " " << to_string(dtype));
        CHECK_THAT(run_tensor(c.op, {a, b}), IsCloseTo(to_tensor(expected, DType::boolean)));
      }
    }
    const Tensor nan = f32({2}, {kNaN, 1});
    const bool ne = &c.op == &ops::not_equal();
    CHECK_THAT(run_tensor(c.op, {nan, f32({}, {kNaN})}),
               IsCloseTo(boolean({2}, {ne ? 1.0 : 0.0, ne ? 1.0 : 0.0})));
  }
  // i64 compares exactly, beyond the 53 bits of a double.
  const Tensor big = Tensor::from_data<std::int64_t>({1}, {(std::int64_t{1} << 60) + 1});
  const Tensor big0 = Tensor::from_data<std::int64_t>({1}, {std::int64_t{1} << 60});
  CHECK(run_tensor(ops::greater(), {big, big0}).values<bool>()[0]);
}

TEST_CASE("reference: logical_and, logical_or and where broadcast", "[ops]") {
  std::mt19937 rng(6);
  for (int trial = 0; trial < 10; ++trial) {
    const auto [sa, sb] = broadcast_pair(rng);
    const Tensor a = random_tensor(sa, DType::boolean, rng);
    const Tensor b = random_tensor(sb, DType::boolean, rng);
    CHECK_THAT(run_tensor(ops::logical_and(), {a, b}),
               IsCloseTo(to_tensor(
                   naive_binary(to_array(a), to_array(b), [](double x, double y) { return x * y; }),
                   DType::boolean)));
    CHECK_THAT(run_tensor(ops::logical_or(), {a, b}),
               IsCloseTo(to_tensor(naive_binary(to_array(a), to_array(b),
                                                [](double x, double y) { return std::max(x, y); }),
                                   DType::boolean)));
    for (DType dtype : {DType::f32, DType::i64, DType::boolean}) {
      const Ints sc = coin(rng) ? sa : sb;
      const Tensor cond = random_tensor(sc, DType::boolean, rng);
      const Tensor x = random_tensor(sa, dtype, rng);
      const Tensor y = random_tensor(sb, dtype, rng);
      const Array ac = to_array(cond), ax = to_array(x), ay = to_array(y);
      Array expected{broadcast_naive({sc, sa, sb}), {}};
      for (std::int64_t i = 0; i < count(expected.shape); ++i) {
        const Ints index = unravel(i, expected.shape);
        expected.data.push_back(at_broadcast(ac, index) != 0 ? at_broadcast(ax, index)
                                                             : at_broadcast(ay, index));
      }
      CHECK_THAT(run_tensor(ops::where(), {cond, x, y}), IsCloseTo(to_tensor(expected, dtype)));
    }
  }
}

// --- reductions ---------------------------------------------------------------------------------

namespace {

enum class Fold { sum, mean, max, min };

/// The naive reduction of `x` over `axes` (all when empty), and Σ|x| per result element.
std::pair<Array, double> naive_reduce(const Array& x, Ints axes, bool keepdims, Fold fold) {
  if (axes.empty())
    for (std::size_t d = 0; d < x.shape.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
  const auto reduced = [&](std::size_t d) {
    return std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(d)) != axes.end();
  };
  Ints kept;
  Ints result_shape;
  std::int64_t n = 1;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    kept.push_back(reduced(d) ? 1 : x.shape[d]);
    if (reduced(d)) n *= x.shape[d];
    if (!reduced(d) || keepdims) result_shape.push_back(reduced(d) ? 1 : x.shape[d]);
  }
  const double init = fold == Fold::max ? -kInf : fold == Fold::min ? kInf : 0;
  std::vector<double> acc(static_cast<std::size_t>(count(kept)), init);
  std::vector<double> abs_sum(acc.size(), 0);
  for (std::int64_t i = 0; i < count(x.shape); ++i) {
    Ints index = unravel(i, x.shape);
    for (std::size_t d = 0; d < index.size(); ++d)
      if (reduced(d)) index[d] = 0;
    const auto j = static_cast<std::size_t>(ravel(index, kept));
    const double v = x.data[static_cast<std::size_t>(i)];
    abs_sum[j] += std::fabs(v);
    if (fold == Fold::sum || fold == Fold::mean)
      acc[j] += v;
    else if (std::isnan(v) || std::isnan(acc[j]))
      acc[j] = kNaN;
    else
      acc[j] = fold == Fold::max ? std::max(acc[j], v) : std::min(acc[j], v);
  }
  if (fold == Fold::mean)
    for (double& v : acc) v /= static_cast<double>(n);
  double worst = 0;
  for (double s : abs_sum) worst = std::max(worst, s);
  return {Array{result_shape, acc},
          worst * (fold == Fold::mean ? 1.0 / std::max<double>(n, 1) : 1.0)};
}

/// A random subset of the axes of a rank-`rank` shape, in random order, some negative.
Ints random_axes(std::mt19937& rng, std::size_t rank) {
  Ints axes;
  for (std::size_t d = 0; d < rank; ++d)
    if (coin(rng)) axes.push_back(static_cast<std::int64_t>(d));
  std::shuffle(axes.begin(), axes.end(), rng);
  return axes;
}

}  // namespace

TEST_CASE("reference: sum, mean, max and min match naive loops over random axes", "[ops]") {
  struct Case {
    const ir::OpDef& op;
    Fold fold;
    std::vector<DType> dtypes;
  };
  const Case cases[] = {
      {ops::sum(),
       Fold::sum,
       {DType::f32, DType::f64, DType::f16, DType::i32, DType::i64, DType::i8}},
      {ops::mean(), Fold::mean, {DType::f32, DType::f64, DType::bf16}},
      {ops::max(), Fold::max, {DType::f32, DType::f64, DType::i8, DType::i32, DType::i64}},
      {ops::min(), Fold::min, {DType::f32, DType::f64, DType::f16, DType::i32, DType::i64}},
  };
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    for (DType dtype : c.dtypes) {
      for (int trial = 0; trial < 12; ++trial) {
        const Ints shape = random_shape(rng);
        const Tensor x = random_tensor(shape, dtype, rng, dtype == DType::i8 ? -5 : -10,
                                       dtype == DType::i8 ? 5 : 10);
        const Ints axes = random_axes(rng, shape.size());
        const bool keepdims = coin(rng);
        auto [expected, sum_abs] = naive_reduce(to_array(x), axes, keepdims, c.fold);
        if (is_integer(dtype))
          for (double& v : expected.data) v = wrap_to(dtype, v);
        bool empty = false;
        {
          std::int64_t n = 1;
          for (std::size_t d = 0; d < shape.size(); ++d)
            if (axes.empty() ||
                std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(d)) != axes.end())
              n *= shape[d];
          empty = n == 0;
        }
        Ints given = axes;
        for (std::int64_t& a : given)
          if (coin(rng, 0.3)) a -= static_cast<std::int64_t>(shape.size());  // negative axes
        const ir::Attrs attrs{{"axes", given}, {"keepdims", keepdims}};
        INFO(c.op.name << " " << to_string(dtype) << " " << to_string(x.shape()) << " axes "
                       << ::Catch::Detail::stringify(given) << " keepdims " << keepdims);
        if (empty && (c.fold == Fold::max || c.fold == Fold::min)) {
          CHECK_THROWS_AS(call(c.op, {x}, attrs), Error);
          continue;
        }
        const double n =
            static_cast<double>(count(shape)) / std::max<double>(count(expected.shape), 1);
        CHECK_THAT(run_tensor(c.op, {x}, attrs),
                   IsCloseTo(to_tensor(expected, dtype), reduction_tolerance(dtype, sum_abs, n)));
      }
    }
  }
}

TEST_CASE("reference: reductions over an empty axis: sum 0, mean NaN, max/min/argmax raise",
          "[ops]") {
  const Tensor x = f32({2, 0}, {});
  const ir::Attrs over1{{"axes", Ints{1}}};
  CHECK_THAT(run_tensor(ops::sum(), {x}, over1), IsCloseTo(f32({2}, {0, 0})));
  CHECK_THAT(run_tensor(ops::sum(), {i32({0}, {})}), IsCloseTo(i32({}, {0})));
  CHECK_THAT(run_tensor(ops::mean(), {x}, over1),
             IsCloseTo(f32({2}, {kNaN, kNaN}), ulps(DType::f32)));
  CHECK_NIMBLE_ERROR(call(ops::max(), {x}, over1), ErrorKind::invalid_argument,
                     "x [2, 0] has no elements along axes [1]");
  CHECK_NIMBLE_ERROR(call(ops::min(), {x}), ErrorKind::invalid_argument,
                     "x [2, 0] has no elements along axes [0, 1]");
  CHECK_NIMBLE_ERROR(call(ops::argmax(), {x}, {{"axis", std::int64_t{-1}}}),
                     ErrorKind::invalid_argument, "x [2, 0] has no elements along axes [1]");
  // Reducing a non-empty axis of an empty tensor is fine: the result is empty.
  CHECK(run_tensor(ops::max(), {f32({0, 3}, {})}, over1).shape() == Shape{0});
  CHECK(run_tensor(ops::argmax(), {f32({0, 3}, {})}, {{"axis", std::int64_t{1}}}).shape() ==
        Shape{0});
}

TEST_CASE("reference: max and min propagate NaN; integer sums wrap", "[ops]") {
  const Tensor x = f32({2, 3}, {1, kNaN, 3, -kInf, -1, -2});
  const ir::Attrs over1{{"axes", Ints{1}}};
  CHECK_THAT(run_tensor(ops::max(), {x}, over1), IsCloseTo(f32({2}, {kNaN, -1}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::min(), {x}, over1),
             IsCloseTo(f32({2}, {kNaN, -kInf}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::max(), {f32({2}, {-kInf, -kInf})}),
             IsCloseTo(f32({}, {-kInf}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::sum(), {to_tensor({3}, {100, 100, 100}, DType::i8)}),
             IsCloseTo(to_tensor({}, {44}, DType::i8)));
}

TEST_CASE("reference: argmax returns the first maximal index, NaN counting as maximal", "[ops]") {
  std::mt19937 rng(8);
  for (DType dtype : {DType::f32, DType::f64, DType::i8, DType::i32, DType::i64, DType::f16}) {
    for (int trial = 0; trial < 12; ++trial) {
      Ints shape = random_shape(rng);
      if (shape.empty()) shape.push_back(3);
      const auto axis = std::uniform_int_distribution<std::size_t>(0, shape.size() - 1)(rng);
      if (shape[axis] == 0) shape[axis] = 2;
      const Tensor x = random_tensor(shape, dtype, rng, 0, 2);  // few values: many ties
      const bool keepdims = coin(rng);
      const Array a = to_array(x);
      Ints out_shape = shape;
      out_shape[axis] = 1;
      Array expected{out_shape,
                     std::vector<double>(static_cast<std::size_t>(count(out_shape)), -1)};
      std::vector<double> best(expected.data.size(), -kInf);
      for (std::int64_t i = 0; i < count(shape); ++i) {
        Ints index = unravel(i, shape);
        const double pos = static_cast<double>(index[axis]);
        index[axis] = 0;
        const auto j = static_cast<std::size_t>(ravel(index, out_shape));
        if (a.data[static_cast<std::size_t>(i)] > best[j] || expected.data[j] < 0) {
          best[j] = a.data[static_cast<std::size_t>(i)];
          expected.data[j] = pos;
        }
      }
      if (!keepdims)
        expected.shape.erase(expected.shape.begin() + static_cast<std::ptrdiff_t>(axis));
      INFO(to_string(dtype) << " " << to_string(x.shape()) << " axis " << axis);
      CHECK_THAT(run_tensor(ops::argmax(), {x},
                            {{"axis", static_cast<std::int64_t>(axis)}, {"keepdims", keepdims}}),
                 IsCloseTo(to_tensor(expected, DType::i64)));
    }
  }
  CHECK_THAT(
      run_tensor(ops::argmax(), {f32({5}, {1, kNaN, 3, kNaN, 3})}, {{"axis", std::int64_t{0}}}),
      IsCloseTo(i64({}, {1})));
  CHECK_THAT(
      run_tensor(ops::argmax(), {f32({2, 3}, {5, 5, 5, -kInf, 0, 0})}, {{"axis", std::int64_t{1}}}),
      IsCloseTo(i64({2}, {0, 1})));
}

TEST_CASE("reference: softmax and log_softmax match naive loops and are stable", "[ops]") {
  std::mt19937 rng(9);
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    for (int trial = 0; trial < 12; ++trial) {
      Ints shape = random_shape(rng);
      if (shape.empty()) shape.push_back(4);
      const auto axis = std::uniform_int_distribution<std::int64_t>(
          -static_cast<std::int64_t>(shape.size()),
          static_cast<std::int64_t>(shape.size()) - 1)(rng);
      const auto ax = static_cast<std::size_t>(
          axis < 0 ? axis + static_cast<std::int64_t>(shape.size()) : axis);
      const Tensor x = random_tensor(shape, dtype, rng, -5, 5);
      const Array a = to_array(x);
      Array soft = a, logsoft = a;
      for (std::int64_t i = 0; i < count(shape); ++i) {
        Ints index = unravel(i, shape);
        long double total = 0;
        for (std::int64_t k = 0; k < shape[ax]; ++k) {
          index[ax] = k;
          total += std::exp(
              static_cast<long double>(a.data[static_cast<std::size_t>(ravel(index, shape))]));
        }
        const double v = a.data[static_cast<std::size_t>(i)];
        soft.data[static_cast<std::size_t>(i)] =
            static_cast<double>(std::exp(static_cast<long double>(v)) / total);
        logsoft.data[static_cast<std::size_t>(i)] = static_cast<double>(v - std::log(total));
      }
      INFO(to_string(dtype) << " " << to_string(x.shape()) << " axis " << axis);
      const ir::Attrs attrs{{"axis", axis}};
      CHECK_THAT(run_tensor(ops::softmax(), {x}, attrs),
                 IsCloseTo(to_tensor(soft, dtype), ulps(dtype, 8)));
      CHECK_THAT(run_tensor(ops::log_softmax(), {x}, attrs),
                 IsCloseTo(to_tensor(logsoft, dtype), reduction_tolerance(dtype, 5, 8)));
    }
  }
  const Tensor big = f32({3}, {1000, 1000, -kInf});
  CHECK_THAT(run_tensor(ops::softmax(), {big}),
             IsCloseTo(f32({3}, {0.5, 0.5, 0}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::log_softmax(), {f32({2}, {1000, 0})}),
             IsCloseTo(f32({2}, {0, -1000}), ulps(DType::f32)));
  CHECK_THAT(run_tensor(ops::softmax(), {f32({2}, {kNaN, 0})}),
             IsCloseTo(f32({2}, {kNaN, kNaN}), ulps(DType::f32)));
}

TEST_CASE("reference: layer_norm normalizes with the biased variance and epsilon", "[ops]") {
  std::mt19937 rng(10);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (int trial = 0; trial < 12; ++trial) {
      Ints shape = random_shape(rng, 3);
      if (shape.empty()) shape.push_back(3);
      const bool last = coin(rng, 0.7);
      const std::size_t ax = last ? shape.size() - 1 : 0;
      const double eps = coin(rng) ? 1e-5 : 0.5;
      const Tensor x = random_tensor(shape, dtype, rng, -4, 4);
      const Tensor gamma = random_tensor({shape[ax]}, dtype, rng, -2, 2);
      const Tensor beta = random_tensor({shape[ax]}, dtype, rng, -2, 2);
      const Array a = to_array(x), g = to_array(gamma), b = to_array(beta);
      Array expected = a;
      for (std::int64_t i = 0; i < count(shape); ++i) {
        Ints index = unravel(i, shape);
        const std::int64_t pos = index[ax];
        double mean = 0, var = 0;
        for (std::int64_t k = 0; k < shape[ax]; ++k) {
          index[ax] = k;
          mean += a.data[static_cast<std::size_t>(ravel(index, shape))];
        }
        mean /= static_cast<double>(shape[ax]);
        for (std::int64_t k = 0; k < shape[ax]; ++k) {
          index[ax] = k;
          const double d = a.data[static_cast<std::size_t>(ravel(index, shape))] - mean;
          var += d * d;
        }
        var /= static_cast<double>(shape[ax]);
        expected.data[static_cast<std::size_t>(i)] = (a.data[static_cast<std::size_t>(i)] - mean) /
                                                         std::sqrt(var + eps) *
                                                         g.data[static_cast<std::size_t>(pos)] +
                                                     b.data[static_cast<std::size_t>(pos)];
      }
      const ir::Attrs attrs{{"axis", last ? std::int64_t{-1} : std::int64_t{0}}, {"epsilon", eps}};
      INFO(to_string(dtype) << " " << to_string(x.shape()) << " axis " << ax);
      CHECK_THAT(run_tensor(ops::layer_norm(), {x, gamma, beta}, attrs),
                 IsCloseTo(to_tensor(expected, dtype),
                           reduction_tolerance(dtype, 16, static_cast<double>(shape[ax]))));
    }
  }
  CHECK_NIMBLE_ERROR(
      call(ops::layer_norm(), {f32({2, 4}, std::vector<double>(8)),
                               f32({5}, std::vector<double>(5)), f32({4}, std::vector<double>(4))}),
      ErrorKind::invalid_argument, "gamma [5] does not match x [2, 4] along axis -1");
  CHECK_NIMBLE_ERROR(
      call(ops::layer_norm(), {f32({2, 4}, std::vector<double>(8)),
                               f32({4}, std::vector<double>(4)), f32({2}, std::vector<double>(2))}),
      ErrorKind::invalid_argument, "beta [2] does not match x [2, 4] along axis -1");
}

// --- linear algebra ------------------------------------------------------------------------------

namespace {

/// The naive [m, n] product of a [m, k] (or [k, m] when ta) and b [k, n] (or [n, k] when tb),
/// reading `a` and `b` from flat offsets; returns Σ|a||b| over k as well.
std::pair<std::vector<double>, double> naive_matmul(const std::vector<double>& a, std::size_t a0,
                                                    const std::vector<double>& b, std::size_t b0,
                                                    std::int64_t m, std::int64_t k, std::int64_t n,
                                                    bool ta, bool tb) {
  std::vector<double> c(static_cast<std::size_t>(m * n), 0);
  double worst = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0, abs = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = a[a0 + static_cast<std::size_t>(ta ? p * m + i : i * k + p)];
        const double y = b[b0 + static_cast<std::size_t>(tb ? j * k + p : p * n + j)];
        sum += x * y;
        abs += std::fabs(x * y);
      }
      c[static_cast<std::size_t>(i * n + j)] = sum;
      worst = std::max(worst, abs);
    }
  return {c, worst};
}

}  // namespace

TEST_CASE("reference: dense is x·Wᵀ + b on random shapes", "[ops]") {
  std::mt19937 rng(11);
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::i32, DType::i64}) {
    for (int trial = 0; trial < 10; ++trial) {
      Ints xs = random_shape(rng, 3);
      if (xs.empty()) xs.push_back(random_dim(rng));
      const std::int64_t k = xs.back(), n = random_dim(rng);
      const Tensor x = random_tensor(xs, dtype, rng, -4, 4);
      const Tensor w = random_tensor({n, k}, dtype, rng, -4, 4);
      const Tensor bias = random_tensor({n}, dtype, rng, -4, 4);
      const Array ax = to_array(x), aw = to_array(w), ab = to_array(bias);
      const std::int64_t rows = k == 0 ? count(Ints(xs.begin(), xs.end() - 1)) : count(xs) / k;
      auto [c, worst] = naive_matmul(ax.data, 0, aw.data, 0, rows, k, n, false, true);
      for (std::size_t i = 0; i < c.size(); ++i) c[i] += ab.data[i % static_cast<std::size_t>(n)];
      Ints ys = xs;
      ys.back() = n;
      INFO(to_string(dtype) << " x " << to_string(x.shape()) << " n " << n);
      CHECK_THAT(run_tensor(ops::dense(), {x, w, bias}),
                 IsCloseTo(to_tensor(ys, c, dtype),
                           reduction_tolerance(dtype, worst + 4, static_cast<double>(k + 1))));
    }
  }
  // Integer products wrap as an exact product would.
  CHECK_THAT(run_tensor(ops::dense(),
                        {to_tensor({1, 2}, {100, 100}, DType::i8),
                         to_tensor({1, 2}, {1, 1}, DType::i8), to_tensor({1}, {0}, DType::i8)}),
             IsCloseTo(to_tensor({1, 1}, {-56}, DType::i8)));
  CHECK_NIMBLE_ERROR(
      call(ops::dense(), {f32({2, 3}, std::vector<double>(6)), f32({4, 5}, std::vector<double>(20)),
                          f32({4}, std::vector<double>(4))}),
      ErrorKind::invalid_argument, "x [2, 3] has 3 columns but weight [4, 5] expects 5");
  CHECK_NIMBLE_ERROR(
      call(ops::dense(), {f32({2, 5}, std::vector<double>(10)),
                          f32({4, 5}, std::vector<double>(20)), f32({3}, std::vector<double>(3))}),
      ErrorKind::invalid_argument, "bias [3] has 3 elements but weight [4, 5] has 4 rows");
}

TEST_CASE("reference: matmul and batch_matmul with transposes and a broadcast batch", "[ops]") {
  std::mt19937 rng(12);
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::bf16}) {
    for (int trial = 0; trial < 16; ++trial) {
      const std::int64_t m = random_dim(rng), k = random_dim(rng), n = random_dim(rng);
      const bool ta = coin(rng), tb = coin(rng);
      const ir::Attrs attrs{{"transpose_a", ta}, {"transpose_b", tb}};
      const Ints as = ta ? Ints{k, m} : Ints{m, k};
      const Ints bs = tb ? Ints{n, k} : Ints{k, n};
      INFO(to_string(dtype) << " m " << m << " k " << k << " n " << n << " ta " << ta << " tb "
                            << tb);
      const Tensor a = random_tensor(as, dtype, rng, -3, 3);
      const Tensor b = random_tensor(bs, dtype, rng, -3, 3);
      auto [c, worst] = naive_matmul(to_array(a).data, 0, to_array(b).data, 0, m, k, n, ta, tb);
      CHECK_THAT(run_tensor(ops::matmul(), {a, b}, attrs),
                 IsCloseTo(to_tensor({m, n}, c, dtype),
                           reduction_tolerance(dtype, worst, static_cast<double>(k))));

      const std::int64_t batch = random_dim(rng);
      const std::int64_t ba = coin(rng, 0.3) ? 1 : batch,
                         bb = ba == 1 ? batch : (coin(rng, 0.3) ? 1 : batch);
      Ints as3 = as, bs3 = bs;
      as3.insert(as3.begin(), ba);
      bs3.insert(bs3.begin(), bb);
      const Tensor a3 = random_tensor(as3, dtype, rng, -3, 3);
      const Tensor b3 = random_tensor(bs3, dtype, rng, -3, 3);
      const std::int64_t out_batch = ba == 1 ? bb : ba;
      std::vector<double> all;
      double worst3 = 0;
      for (std::int64_t i = 0; i < out_batch; ++i) {
        auto [ci, wi] = naive_matmul(
            to_array(a3).data, static_cast<std::size_t>(ba == 1 ? 0 : i * m * k), to_array(b3).data,
            static_cast<std::size_t>(bb == 1 ? 0 : i * k * n), m, k, n, ta, tb);
        all.insert(all.end(), ci.begin(), ci.end());
        worst3 = std::max(worst3, wi);
      }
      INFO("batch " << ba << " vs " << bb);
      CHECK_THAT(run_tensor(ops::batch_matmul(), {a3, b3}, attrs),
                 IsCloseTo(to_tensor({out_batch, m, n}, all, dtype),
                           reduction_tolerance(dtype, worst3, static_cast<double>(k))));
    }
  }
  CHECK_NIMBLE_ERROR(call(ops::matmul(), {f32({2, 3}, std::vector<double>(6)),
                                          f32({4, 5}, std::vector<double>(20))}),
                     ErrorKind::invalid_argument, "a [2, 3] has k = 3 but b [4, 5] has k = 4");
  CHECK_NIMBLE_ERROR(
      call(ops::matmul(),
           {f32({2, 3}, std::vector<double>(6)), f32({4, 5}, std::vector<double>(20))},
           {{"transpose_a", true}}),
      ErrorKind::invalid_argument, "a [2, 3] has k = 2 but b [4, 5] has k = 4");
  CHECK_NIMBLE_ERROR(
      call(ops::batch_matmul(),
           {f32({2, 2, 3}, std::vector<double>(12)), f32({3, 3, 4}, std::vector<double>(36))}),
      ErrorKind::invalid_argument, "a [2, 2, 3] and b [3, 3, 4] do not broadcast: dim 0 is 2 vs 3");
}

// --- shape and data movement ---------------------------------------------------------------------

TEST_CASE("reference: reshape infers -1, copies 0 and checks the element count at run time",
          "[ops]") {
  const Tensor x = f32({2, 3, 4}, std::vector<double>(24, 1.5));
  const auto reshape = [](const Tensor& t, Ints newshape, bool allow_zero = false) {
    return call(ops::reshape(), {t}, {{"newshape", newshape}, {"allow_zero", allow_zero}}).tensor();
  };
  CHECK(reshape(x, {-1}).shape() == Shape{24});
  CHECK(reshape(x, {4, -1}).shape() == Shape{4, 6});
  CHECK(reshape(x, {0, -1}).shape() == Shape{2, 12});
  CHECK(reshape(x, {0, 0, 2, 2}).shape() == Shape{2, 3, 2, 2});
  CHECK(reshape(f32({0, 3}, {}), {0, 5}, true).shape() == Shape{0, 5});
  CHECK(reshape(f32({0, 3}, {}), {-1, 3}).shape() == Shape{0, 3});
  CHECK(reshape(f32({}, {7}), {1, 1}).shape() == Shape{1, 1});
  std::mt19937 rng(13);
  const Tensor r = random_tensor({3, 4}, DType::i32, rng, -9, 9);
  const Tensor y = run_tensor(ops::reshape(), {r}, {{"newshape", Ints{2, -1, 2}}});
  CHECK(y.shape() == Shape{2, 3, 2});
  CHECK(to_array(y).data == to_array(r).data);
  CHECK_NIMBLE_ERROR(
      reshape(x, {5, -1}), ErrorKind::invalid_argument,
      "x [2, 3, 4] cannot be reshaped to [5, -1]: 24 elements are not a multiple of 5");
  CHECK_NIMBLE_ERROR(reshape(x, {5, 5}), ErrorKind::invalid_argument,
                     "x [2, 3, 4] has 24 elements but newshape [5, 5] has 25");
  CHECK_NIMBLE_ERROR(
      reshape(f32({0, 3}, {}), {0, -1}, true), ErrorKind::invalid_argument,
      "x [0, 3] cannot be reshaped to [0, -1]: with a 0 among the other dims the -1 is ambiguous");
  CHECK_NIMBLE_ERROR(reshape(x, {-1, -1}), ErrorKind::invalid_argument,
                     "newshape [-1, -1] has more than one -1");
  CHECK_NIMBLE_ERROR(reshape(x, {0, 0, 0, 0}), ErrorKind::invalid_argument,
                     "newshape [0, 0, 0, 0] copies dim 3 but x [2, 3, 4] has rank 3");
}

TEST_CASE("reference: results are fresh tensors and inputs are untouched", "[ops]") {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor before = x.clone();
  const Value results[] = {call(ops::reshape(), {x}, {{"newshape", Ints{3, 2}}}),
                           call(ops::expand_dims(), {x}, {{"axis", std::int64_t{0}}}),
                           call(ops::squeeze(), {x}),
                           call(ops::transpose(), {x}, {{"axes", Ints{0, 1}}}),
                           call(ops::relu(), {x}),
                           call(ops::add(), {x, f32({}, {0})}),
                           call(ops::strided_slice(), {x}, {{"begin", Ints{0}}, {"end", Ints{2}}}),
                           call(ops::dynamic_update_slice(), {x, f32({0, 3}, {}), i64({}, {0})})};
  for (const Value& r : results) CHECK(r.tensor().storage() != x.storage());
  CHECK_THAT(x, IsCloseTo(before));
}

TEST_CASE("reference: transpose, expand_dims and squeeze move data as naive loops do", "[ops]") {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 20; ++trial) {
    const Ints shape = random_shape(rng);
    const Tensor x = random_tensor(shape, coin(rng) ? DType::f32 : DType::i8, rng, -9, 9);
    Ints perm(shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const bool reverse = coin(rng, 0.3);  // axes [] reverses
    if (reverse) {
      std::iota(perm.begin(), perm.end(), 0);
      std::reverse(perm.begin(), perm.end());
    }
    Ints out_shape;
    for (std::int64_t p : perm) out_shape.push_back(shape[static_cast<std::size_t>(p)]);
    const Array a = to_array(x);
    Array expected{out_shape, {}};
    for (std::int64_t i = 0; i < count(out_shape); ++i) {
      const Ints out_index = unravel(i, out_shape);
      Ints in_index(shape.size());
      for (std::size_t d = 0; d < perm.size(); ++d)
        in_index[static_cast<std::size_t>(perm[d])] = out_index[d];
      expected.data.push_back(a.data[static_cast<std::size_t>(ravel(in_index, shape))]);
    }
    const Ints axes = reverse ? Ints{} : perm;
    INFO(to_string(x.shape()) << " perm " << ::Catch::Detail::stringify(perm));
    CHECK_THAT(run_tensor(ops::transpose(), {x}, {{"axes", axes}}),
               IsCloseTo(to_tensor(expected, x.dtype())));

    const auto axis = std::uniform_int_distribution<std::int64_t>(
        0, static_cast<std::int64_t>(shape.size()))(rng);
    Ints expanded = shape;
    expanded.insert(expanded.begin() + axis, 1);
    const Tensor e = run_tensor(ops::expand_dims(), {x}, {{"axis", axis}});
    CHECK(e.shape() == to_shape(expanded));
    CHECK(to_array(e).data == a.data);

    Ints squeezed;
    for (std::int64_t d : shape)
      if (d != 1) squeezed.push_back(d);
    const Tensor s = run_tensor(ops::squeeze(), {x});
    CHECK(s.shape() == to_shape(squeezed));
    CHECK(to_array(s).data == a.data);
  }
  const Tensor x = f32({1, 2, 1}, {1, 2});
  CHECK(run_tensor(ops::squeeze(), {x}, {{"axes", Ints{-1}}}).shape() == Shape{1, 2});
  CHECK_NIMBLE_ERROR(call(ops::squeeze(), {x}, {{"axes", Ints{1}}}), ErrorKind::invalid_argument,
                     "axis 1 of x [1, 2, 1] is 2, not 1");
  CHECK_NIMBLE_ERROR(call(ops::transpose(), {x}, {{"axes", Ints{1, 0}}}),
                     ErrorKind::invalid_argument,
                     "axes [1, 0] is not a permutation of the 3 axes of x");
}

TEST_CASE("reference: concatenate and split are inverse, with run-time checks", "[ops]") {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 20; ++trial) {
    Ints shape = random_shape(rng);
    if (shape.empty()) shape.push_back(2);
    const auto axis = std::uniform_int_distribution<std::size_t>(0, shape.size() - 1)(rng);
    const auto parts = std::uniform_int_distribution<int>(1, 4)(rng);
    std::vector<Value> fields;
    std::vector<Array> arrays;
    Ints sizes;
    for (int p = 0; p < parts; ++p) {
      Ints s = shape;
      s[axis] = random_dim(rng);
      sizes.push_back(s[axis]);
      const Tensor t = random_tensor(s, DType::f64, rng);
      fields.emplace_back(t);
      arrays.push_back(to_array(t));
    }
    Ints out_shape = shape;
    out_shape[axis] = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
    Array expected{out_shape, {}};
    for (std::int64_t i = 0; i < count(out_shape); ++i) {
      Ints index = unravel(i, out_shape);
      std::size_t p = 0;
      while (index[axis] >= sizes[p]) index[axis] -= sizes[p++];
      expected.data.push_back(
          arrays[p].data[static_cast<std::size_t>(ravel(index, arrays[p].shape))]);
    }
    INFO(to_string(to_shape(out_shape)) << " axis " << axis);
    const Tensor joined = run_tensor(ops::concatenate(), {Value::tuple(fields)},
                                     {{"axis", static_cast<std::int64_t>(axis)}});
    CHECK_THAT(joined, IsCloseTo(to_tensor(expected, DType::f64)));

    // Split back at the boundaries.
    Ints indices;
    std::int64_t at = 0;
    for (std::size_t p = 0; p + 1 < sizes.size(); ++p) indices.push_back(at += sizes[p]);
    if (!indices.empty()) {
      const Value pieces = run(ops::split(), {joined},
                               {{"indices", indices}, {"axis", static_cast<std::int64_t>(axis)}});
      REQUIRE(pieces.fields().size() == fields.size());
      for (std::size_t p = 0; p < fields.size(); ++p)
        CHECK_THAT(pieces[p].tensor(), IsCloseTo(fields[p].tensor()));
    }
  }
  const Tensor x = f32({6, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Value thirds =
      run(ops::split(), {x}, {{"sections", std::int64_t{3}}, {"axis", std::int64_t{0}}});
  REQUIRE(thirds.fields().size() == 3);
  CHECK_THAT(thirds[1].tensor(), IsCloseTo(f32({2, 2}, {4, 5, 6, 7})));
  const Value tail = run(ops::split(), {x}, {{"indices", Ints{6}}, {"axis", std::int64_t{0}}});
  CHECK(tail[1].tensor().shape() == Shape{0, 2});
  CHECK_NIMBLE_ERROR(
      call(ops::split(), {x}, {{"sections", std::int64_t{4}}, {"axis", std::int64_t{0}}}),
      ErrorKind::invalid_argument, "axis 0 of x [6, 2] has 6 elements, not divisible into 4");
  CHECK_NIMBLE_ERROR(call(ops::split(), {x}, {{"indices", Ints{2, 7}}, {"axis", std::int64_t{0}}}),
                     ErrorKind::invalid_argument,
                     "indices [2, 7] go past the 6 elements of axis 0 of x [6, 2]");
  CHECK_NIMBLE_ERROR(call(ops::concatenate(),
                          {Value::tuple({f32({2, 3}, std::vector<double>(6)),
                                         f32({2, 4}, std::vector<double>(8))})},
                          {{"axis", std::int64_t{0}}}),
                     ErrorKind::invalid_argument,
                     "fields.1 [2, 4] has 4 at dim 1 but fields.0 [2, 3] has 3");
}

namespace {

/// The indices python's range(*slice(begin, end, stride).indices(extent)) gives.
Ints python_slice(std::int64_t extent, std::int64_t begin, std::int64_t end, std::int64_t stride) {
  const auto norm = [extent](std::int64_t v) {
    if (v < 0) v += extent;
    return std::min(std::max(v, std::int64_t{0}), extent);
  };
  Ints out;
  for (std::int64_t i = norm(begin); i < norm(end); i += stride) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("reference: strided_slice and dynamic_strided_slice follow numpy slicing with clamping",
          "[ops]") {
  std::mt19937 rng(16);
  for (int trial = 0; trial < 30; ++trial) {
    Ints shape = random_shape(rng);
    if (shape.empty()) shape.push_back(3);
    const Tensor x = random_tensor(shape, DType::i32, rng, -50, 50);
    const bool dynamic = coin(rng, 0.3);
    Ints axes, begin, end, strides;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (!dynamic && coin(rng, 0.3)) continue;
      axes.push_back(static_cast<std::int64_t>(d));
      begin.push_back(std::uniform_int_distribution<std::int64_t>(-7, 7)(rng));
      end.push_back(std::uniform_int_distribution<std::int64_t>(-7, 7)(rng));
      strides.push_back(dynamic ? 1 : std::uniform_int_distribution<std::int64_t>(1, 3)(rng));
    }
    if (dynamic) {  // the leading k axes
      const auto k = std::uniform_int_distribution<std::size_t>(0, axes.size())(rng);
      axes.resize(k), begin.resize(k), end.resize(k), strides.resize(k);
    }
    std::vector<Ints> picks;
    Ints out_shape;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const auto it = std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(d));
      Ints pick;
      if (it == axes.end()) {
        pick.resize(static_cast<std::size_t>(shape[d]));
        std::iota(pick.begin(), pick.end(), 0);
      } else {
        const auto j = static_cast<std::size_t>(it - axes.begin());
        pick = python_slice(shape[d], begin[j], end[j], strides[j]);
      }
      out_shape.push_back(static_cast<std::int64_t>(pick.size()));
      picks.push_back(pick);
    }
    const Array a = to_array(x);
    Array expected{out_shape, {}};
    for (std::int64_t i = 0; i < count(out_shape); ++i) {
      Ints index = unravel(i, out_shape);
      for (std::size_t d = 0; d < index.size(); ++d)
        index[d] = picks[d][static_cast<std::size_t>(index[d])];
      expected.data.push_back(a.data[static_cast<std::size_t>(ravel(index, shape))]);
    }
    INFO(to_string(x.shape()) << " axes " << ::Catch::Detail::stringify(axes) << " begin "
                              << ::Catch::Detail::stringify(begin) << " end "
                              << ::Catch::Detail::stringify(end) << " strides "
                              << ::Catch::Detail::stringify(strides));
    Tensor result;
    if (dynamic) {
      const auto k = static_cast<std::int64_t>(begin.size());
      std::vector<double> b(begin.begin(), begin.end()), e(end.begin(), end.end());
      result = call(ops::dynamic_strided_slice(), {x, i64({k}, b), i64({k}, e)}).tensor();
    } else {
      result = run_tensor(ops::strided_slice(), {x},
                          {{"begin", begin}, {"end", end}, {"strides", strides}, {"axes", axes}});
    }
    CHECK_THAT(result, IsCloseTo(to_tensor(expected, DType::i32)));
  }
  const Tensor x = f32({5}, {0, 1, 2, 3, 4});
  CHECK_THAT(run_tensor(ops::strided_slice(), {x}, {{"begin", Ints{-3}}, {"end", Ints{100}}}),
             IsCloseTo(f32({3}, {2, 3, 4})));
  CHECK_NIMBLE_ERROR(call(ops::strided_slice(), {x},
                          {{"begin", Ints{4}}, {"end", Ints{0}}, {"strides", Ints{-1}}}),
                     ErrorKind::invalid_argument, "strides [-1] has a non-positive stride -1");
  CHECK_NIMBLE_ERROR(
      call(ops::strided_slice(), {x}, {{"begin", Ints{0}}, {"end", Ints{5}}, {"strides", Ints{0}}}),
      ErrorKind::invalid_argument, "strides [0] has a non-positive stride 0");
  CHECK_THAT(call(ops::dynamic_strided_slice(), {x, i64({1}, {1}), i64({1}, {-1})}).tensor(),
             IsCloseTo(f32({3}, {1, 2, 3})));
}

TEST_CASE("reference: take and embedding gather rows and reject indices out of range", "[ops]") {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 20; ++trial) {
    Ints shape = random_shape(rng, 3);
    if (shape.empty()) shape.push_back(3);
    const auto axis = std::uniform_int_distribution<std::size_t>(0, shape.size() - 1)(rng);
    if (shape[axis] == 0) shape[axis] = 2;
    const Tensor data = random_tensor(shape, DType::f32, rng);
    const Ints ishape = random_shape(rng, 2);
    const DType idtype = coin(rng) ? DType::i32 : DType::i64;
    const Tensor indices =
        random_tensor(ishape, idtype, rng, 0, static_cast<double>(shape[axis] - 1));
    const Array a = to_array(data), ai = to_array(indices);
    Ints out_shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(axis));
    out_shape.insert(out_shape.end(), ishape.begin(), ishape.end());
    out_shape.insert(out_shape.end(), shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1,
                     shape.end());
    Array expected{out_shape, {}};
    for (std::int64_t i = 0; i < count(out_shape); ++i) {
      const Ints o = unravel(i, out_shape);
      Ints in(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(axis));
      const Ints idx(o.begin() + static_cast<std::ptrdiff_t>(axis),
                     o.begin() + static_cast<std::ptrdiff_t>(axis + ishape.size()));
      in.push_back(
          static_cast<std::int64_t>(ai.data[static_cast<std::size_t>(ravel(idx, ishape))]));
      in.insert(in.end(), o.begin() + static_cast<std::ptrdiff_t>(axis + ishape.size()), o.end());
      expected.data.push_back(a.data[static_cast<std::size_t>(ravel(in, shape))]);
    }
    INFO(to_string(data.shape()) << " axis " << axis << " indices " << to_string(indices.shape()));
    CHECK_THAT(
        run_tensor(ops::take(), {data, indices}, {{"axis", static_cast<std::int64_t>(axis)}}),
        IsCloseTo(to_tensor(expected, DType::f32)));
    if (shape.size() == 2 && axis == 0)
      CHECK_THAT(run_tensor(ops::embedding(), {data, indices}),
                 IsCloseTo(to_tensor(expected, DType::f32)));
  }
  const Tensor data = f32({5, 3}, std::vector<double>(15, 1));
  CHECK_NIMBLE_ERROR(call(ops::take(), {data, i64({2}, {0, 5})}), ErrorKind::runtime_error,
                     "indices[1] = 5 is out of range for axis 0 of data [5, 3] (extent 5)");
  CHECK_NIMBLE_ERROR(call(ops::take(), {data, i32({1, 2}, {-1, 0})}, {{"axis", std::int64_t{1}}}),
                     ErrorKind::runtime_error,
                     "indices[0, 0] = -1 is out of range for axis 1 of data [5, 3] (extent 3)");
  CHECK_NIMBLE_ERROR(call(ops::take(), {f32({0, 2}, {}), i64({}, {0})}), ErrorKind::runtime_error,
                     "indices[] = 0 is out of range for axis 0 of data [0, 2] (extent 0)");
  CHECK_NIMBLE_ERROR(
      call(ops::embedding(), {f32({8, 4}, std::vector<double>(32)), i32({3}, {1, 2, 10})}),
      ErrorKind::runtime_error, "ids[2] = 10 is out of range for table [8, 4] (8 rows)");
  CHECK(run_tensor(ops::embedding(), {f32({8, 4}, std::vector<double>(32)), i64({0, 2}, {})})
            .shape() == Shape{0, 2, 4});
}

// --- creation
// -------------------------------------------------------------------------------------

TEST_CASE("reference: zeros, ones and full take a run-time shape", "[ops]") {
  for (DType dtype : kAllDTypes) {
    INFO(to_string(dtype));
    const Tensor shape = i64({3}, {2, 0, 3});
    CHECK(call_tensor(ops::zeros(), {shape}, {{"dtype", dtype}}).shape() == Shape{2, 0, 3});
    CHECK_THAT(call_tensor(ops::zeros(), {i64({2}, {2, 2})}, {{"dtype", dtype}}),
               IsCloseTo(to_tensor({2, 2}, {0, 0, 0, 0}, dtype)));
    CHECK_THAT(call_tensor(ops::ones(), {i64({1}, {3})}, {{"dtype", dtype}}),
               IsCloseTo(to_tensor({3}, {1, 1, 1}, dtype)));
    CHECK_THAT(call_tensor(ops::full(), {i64({0}, {}), f32({}, {1})}, {{"dtype", dtype}}),
               IsCloseTo(to_tensor({}, {1}, dtype)));
  }
  CHECK_THAT(call_tensor(ops::full(), {i64({2}, {1, 2}), f32({}, {2.7})}, {{"dtype", DType::i32}}),
             IsCloseTo(i32({1, 2}, {2, 2})));
  CHECK_THAT(call_tensor(ops::full(), {i64({1}, {2}), f32({}, {kNaN})}, {{"dtype", DType::f64}}),
             IsCloseTo(to_tensor({2}, {kNaN, kNaN}, DType::f64), ulps(DType::f64)));
  CHECK_NIMBLE_ERROR(call(ops::zeros(), {i64({2}, {2, -1})}, {{"dtype", DType::f32}}),
                     ErrorKind::invalid_argument, "shape [2, -1] has a negative extent -1");
  CHECK_NIMBLE_ERROR(call(ops::full(), {i64({1}, {-3}), f32({}, {0})}, {{"dtype", DType::f32}}),
                     ErrorKind::invalid_argument, "shape [-3] has a negative extent -3");
}

TEST_CASE("reference: arange counts ceil((stop - start) / step) elements", "[ops]") {
  const auto arange = [](DType dtype, double start, double stop, double step) {
    return call_tensor(ops::arange(), {to_tensor({}, {start}, dtype), to_tensor({}, {stop}, dtype),
                                       to_tensor({}, {step}, dtype)});
  };
  CHECK_THAT(arange(DType::i32, 0, 5, 1), IsCloseTo(i32({5}, {0, 1, 2, 3, 4})));
  CHECK_THAT(arange(DType::i64, 10, 0, -3), IsCloseTo(i64({4}, {10, 7, 4, 1})));
  CHECK_THAT(arange(DType::i8, -128, 127, 100),
             IsCloseTo(to_tensor({3}, {-128, -28, 72}, DType::i8)));
  CHECK(arange(DType::i32, 5, 0, 1).shape() == Shape{0});
  CHECK(arange(DType::f32, 0, 1, 0.1).shape() == Shape{10});
  CHECK_THAT(arange(DType::f64, 1, 2, 0.25),
             IsCloseTo(to_tensor({4}, {1, 1.25, 1.5, 1.75}, DType::f64)));
  CHECK_THAT(arange(DType::f32, 0.5, -1, -0.5), IsCloseTo(f32({3}, {0.5, 0, -0.5})));
  const Tensor huge =
      Tensor::from_data<std::int64_t>({}, {std::numeric_limits<std::int64_t>::min()});
  const Tensor huge_stop =
      Tensor::from_data<std::int64_t>({}, {std::numeric_limits<std::int64_t>::max()});
  const Tensor huge_step =
      Tensor::from_data<std::int64_t>({}, {std::numeric_limits<std::int64_t>::max()});
  CHECK(call_tensor(ops::arange(), {huge, huge_stop, huge_step}).values<std::int64_t>()[2] ==
        std::numeric_limits<std::int64_t>::max() - 1);
  CHECK_NIMBLE_ERROR(arange(DType::i32, 0, 5, 0), ErrorKind::runtime_error, "arange: step is 0");
  CHECK_NIMBLE_ERROR(arange(DType::f32, 0, kInf, 1), ErrorKind::runtime_error,
                     "arange: start 0, stop inf and step 1 must be finite");
}

TEST_CASE("reference: nonzero lists the indices of non-zero elements; shape_of the dims", "[ops]") {
  std::mt19937 rng(18);
  for (int trial = 0; trial < 20; ++trial) {
    const Ints shape = random_shape(rng);
    const DType dtype =
        kAllDTypes[std::uniform_int_distribution<std::size_t>(0, std::size(kAllDTypes) - 1)(rng)];
    const Tensor x = random_tensor(shape, dtype, rng, -1, 1);
    std::vector<double> expected;
    std::int64_t found = 0;
    for (std::int64_t i = 0; i < count(shape); ++i)
      if (x.element_as_double(i) != 0) {
        ++found;
        for (std::int64_t v : unravel(i, shape)) expected.push_back(static_cast<double>(v));
      }
    INFO(to_string(dtype) << " " << to_string(x.shape()));
    CHECK_THAT(call(ops::nonzero(), {x}).tensor(),
               IsCloseTo(i64({found, static_cast<std::int64_t>(shape.size())}, expected)));
    std::vector<double> dims(shape.begin(), shape.end());
    CHECK_THAT(run_tensor(ops::shape_of(), {x}),
               IsCloseTo(i64({static_cast<std::int64_t>(shape.size())}, dims)));
  }
  CHECK_THAT(call(ops::nonzero(), {f32({3}, {kNaN, 0, -0.0})}).tensor(),
             IsCloseTo(i64({1, 1}, {0})));
  CHECK(call(ops::nonzero(), {f32({}, {2})}).tensor().shape() == Shape{1, 0});
}

TEST_CASE("reference: device_copy is a fresh tensor with the same elements (one memory)", "[ops]") {
  const Tensor x = f32({2, 2}, {1, -2, 3.5, kNaN});
  const Tensor y = call(ops::device_copy(), {x}, {{"src", std::string("cpu")}, {"dst", std::string("cuda:0")}}).tensor();
  CHECK(y.raw_data() != x.raw_data());
  CHECK(y.shape() == x.shape());
  CHECK(std::memcmp(y.raw_data(), x.raw_data(), x.nbytes()) == 0);
}

// --- lists
// -------------------------------------------------------------------------------------------

TEST_CASE("reference: stack collects a List's elements, first element first", "[ops]") {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 12; ++trial) {
    const Ints shape = random_shape(rng, 3);
    const auto length = std::uniform_int_distribution<int>(1, 5)(rng);
    std::vector<Tensor> elements;
    for (int i = 0; i < length; ++i) elements.push_back(random_tensor(shape, DType::f32, rng));
    const auto axis = std::uniform_int_distribution<std::int64_t>(
        0, static_cast<std::int64_t>(shape.size()))(rng);
    Ints out_shape = shape;
    out_shape.insert(out_shape.begin() + axis, length);
    Array expected{out_shape, {}};
    for (std::int64_t i = 0; i < count(out_shape); ++i) {
      Ints index = unravel(i, out_shape);
      const std::int64_t e = index[static_cast<std::size_t>(axis)];
      index.erase(index.begin() + axis);
      expected.data.push_back(
          elements[static_cast<std::size_t>(e)].element_as_double(ravel(index, shape)));
    }
    INFO(to_string(to_shape(shape)) << " x " << length << " axis " << axis);
    CHECK_THAT(call(ops::stack(), {make_list(elements)}, {{"axis", axis}}).tensor(),
               IsCloseTo(to_tensor(expected, DType::f32)));
  }
  // A long list is walked without recursion.
  std::vector<Tensor> many;
  for (int i = 0; i < 100000; ++i) many.push_back(Tensor::scalar(static_cast<std::int32_t>(i)));
  const Tensor stacked = call(ops::stack(), {make_list(many)}).tensor();
  REQUIRE(stacked.shape() == Shape{100000});
  CHECK(stacked.values<std::int32_t>()[0] == 0);
  CHECK(stacked.values<std::int32_t>()[99999] == 99999);

  CHECK_NIMBLE_ERROR(call(ops::stack(), {make_list({})}), ErrorKind::invalid_argument,
                     "cannot stack an empty list: the element shape is unknown");
  CHECK_NIMBLE_ERROR(
      call(ops::stack(), {make_list({f32({2}, {1, 2}), f32({2}, {1, 2}), f32({3}, {1, 2, 3})})}),
      ErrorKind::invalid_argument, "element 2 has shape [3] but element 0 has [2]");
}

TEST_CASE("reference: dynamic_update_slice writes rows at a run-time offset", "[ops]") {
  const Tensor dest = f32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Tensor update = f32({2, 2}, {-1, -2, -3, -4});
  CHECK_THAT(run_tensor(ops::dynamic_update_slice(), {dest, update, i64({}, {1})}),
             IsCloseTo(f32({4, 2}, {0, 1, -1, -2, -3, -4, 6, 7})));
  CHECK_THAT(run_tensor(ops::dynamic_update_slice(), {dest, update, i64({}, {2})}),
             IsCloseTo(f32({4, 2}, {0, 1, 2, 3, -1, -2, -3, -4})));
  CHECK_THAT(dest, IsCloseTo(f32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7})));
  CHECK_NIMBLE_ERROR(call(ops::dynamic_update_slice(), {dest, update, i64({}, {3})}),
                     ErrorKind::runtime_error,
                     "update [2, 2] at offset 3 is out of range for dest [4, 2]");
  CHECK_NIMBLE_ERROR(call(ops::dynamic_update_slice(), {dest, update, i64({}, {-1})}),
                     ErrorKind::runtime_error,
                     "update [2, 2] at offset -1 is out of range for dest [4, 2]");
  CHECK_NIMBLE_ERROR(
      call(ops::dynamic_update_slice(), {dest, f32({1, 3}, {1, 2, 3}), i64({}, {0})}),
      ErrorKind::invalid_argument, "update [1, 3] does not fit the rows of dest [4, 2]");
}
