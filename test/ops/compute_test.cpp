// Compute rules (lib/ops/compute.hpp) against the reference kernels: for
// every op with a rule, the naive evaluator (compute_eval.hpp) runs the rule
// on random inputs and shapes (dims of 0 and 1, Any dims that are 1 at run
// time, symbolic dims shared between arguments, NaN and infinities) and must
// agree with op.reference within the tolerance policy: a few ulps
// elementwise, Σ|x|·n·ε for reductions and products. Also: the registry's
// patterns, the error paths (checked loads and divisions, failed checks,
// binding conflicts) and the printer.
#include "ops/compute.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nimble/runtime/value.hpp"
#include "ops/compute_eval.hpp"
#include "ops/ops.hpp"
#include "runtime/element.hpp"
#include "support/op_calls.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::IsCloseTo;
using namespace nimble::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<Tensor> evaluate_rule(const ir::OpDef&, std::span<const te::Tensor> outputs,
                                  std::span<const te::Tensor> placeholders,
                                  std::span<const Tensor> values, std::span<const Tensor>) {
  return te::evaluate(outputs, placeholders, values);
}

// --- direct use of rules ---------------------------------------------------------------------

/// The rule of `op` for placeholders of `types` (named after the op's
/// arguments), evaluated on `inputs`.
std::vector<Tensor> run_rule(const ir::OpDef& op, const std::vector<ir::Type>& types,
                             const std::vector<Tensor>& inputs, const ir::Attrs& attrs = {}) {
  te::SymbolTable symbols;
  std::vector<te::Tensor> placeholders;
  for (std::size_t i = 0; i < types.size(); ++i)
    placeholders.push_back(te::placeholder_for(*types[i].as<ir::TensorTypeNode>(),
                                               std::string(op.arg_names[i]), symbols));
  return te::evaluate(op.compute(placeholders, attrs), placeholders, inputs);
}

ir::Type f32(std::vector<ir::Dim> dims) {
  return ir::tensor_type(std::move(dims), DType::f32);
}

}  // namespace

// --- the registry -------------------------------------------------------------------------------

TEST_CASE("compute: every op has a compute rule or is opaque, never both", "[compute]") {
  std::set<std::string_view> opaque;
  for (const ir::OpDef* op : ir::all_ops()) {
    INFO(op->name);
    CHECK((op->compute == nullptr) == (op->pattern == ir::OpPattern::opaque));
    if (op->pattern == ir::OpPattern::opaque) opaque.insert(op->name);
  }
  // nonzero compacts data-dependent positions, shape_of is the VM's ShapeOf,
  // stack walks a List value, device_copy is a transfer.
  CHECK(opaque == std::set<std::string_view>{"nonzero", "shape_of", "stack", "device_copy"});
  CHECK(ops::add().pattern == ir::OpPattern::broadcast);
  CHECK(ops::exp().pattern == ir::OpPattern::elementwise);
  CHECK(ops::take().pattern == ir::OpPattern::injective);
  CHECK(ops::softmax().pattern == ir::OpPattern::reduction);
  CHECK(ops::dense().pattern == ir::OpPattern::out_elemwise_fusable);
}

TEST_CASE("compute: every rule agrees with its reference kernel on random calls", "[compute]") {
  const std::map<const ir::OpDef*, Generator> calls = generators();
  Rng rng(20240601);
  for (const ir::OpDef* op : ir::all_ops()) {
    if (op->compute == nullptr) continue;
    INFO("op " << op->name << " (add a generator to compute_test.cpp)");
    const auto it = calls.find(op);
    REQUIRE(it != calls.end());
    for (int trial = 0; trial < 60; ++trial) {
      const Call call = it->second(rng);
      check_rule(*op, call, rng, evaluate_rule);
    }
  }
}

TEST_CASE("compute: broadcasting selects on a run-time 1 and checks the dims", "[compute]") {
  // a: f32[?, 3] and b: f32[?, 1]: either Any dim may be 1 at run time.
  const std::vector<ir::Type> types{f32({ir::Any, 3}), f32({ir::Any, 1})};
  const Tensor a = from_values({1, 3}, DType::f32, {1, 2, 3});
  const Tensor b = from_values({2, 1}, DType::f32, {10, 20});
  const std::vector<Tensor> sum = run_rule(ops::add(), types, {a, b});
  CHECK_THAT(sum[0], IsCloseTo(from_values({2, 3}, DType::f32, {11, 12, 13, 21, 22, 23})));
  const Tensor c = from_values({3, 1}, DType::f32, {1, 2, 3});
  CHECK_NIMBLE_ERROR(
      run_rule(ops::add(), types, {from_values({2, 3}, DType::f32, {1, 2, 3, 4, 5, 6}), c}),
      ErrorKind::invalid_argument, "add: a, b do not broadcast at dim 0");
}

TEST_CASE("compute: placeholders bind shape Vars and reject conflicting inputs", "[compute]") {
  const ir::Dim n("n");
  const std::vector<ir::Type> types{f32({n, 2}), f32({n, 2})};
  const Tensor x = from_values({1, 2}, DType::f32, {1, 2});
  const Tensor y = from_values({2, 2}, DType::f32, {1, 2, 3, 4});
  CHECK_NIMBLE_ERROR(run_rule(ops::sub(), types, {x, y}), ErrorKind::invalid_argument,
                     "b [2, 2] has 2 at dim 0 but n is 1 (from a dim 0)");
  CHECK_NIMBLE_ERROR(run_rule(ops::sub(), types, {x, from_values({1, 3}, DType::f32, {1, 2, 3})}),
                     ErrorKind::invalid_argument, "b [1, 3] has 3 at dim 1, expected 2");
  CHECK_NIMBLE_ERROR(run_rule(ops::sub(), types, {x, from_values({2}, DType::f32, {1, 2})}),
                     ErrorKind::invalid_argument, "b must have rank 2, got [2]");
  CHECK_NIMBLE_ERROR(run_rule(ops::sub(), types, {x, from_values({1, 2}, DType::f64, {1, 2})}),
                     ErrorKind::type_error, "b must be f32, got f64");
  // One symbol, one Var: no select is needed, and the result is exact.
  CHECK_THAT(run_rule(ops::sub(), types, {y, y})[0],
             IsCloseTo(from_values({2, 2}, DType::f32, {0, 0, 0, 0})));
}

// --- error paths -----------------------------------------------------------------------------

TEST_CASE("compute: checked loads raise an error for an index out of range", "[compute]") {
  const Tensor data = from_values({3, 2}, DType::f32, {1, 2, 3, 4, 5, 6});
  const std::vector<ir::Type> types{f32({3, 2}), ir::tensor_type({2}, DType::i64)};
  CHECK_THAT(run_rule(ops::take(), types, {data, i64s({2, 0})})[0],
             IsCloseTo(from_values({2, 2}, DType::f32, {5, 6, 1, 2})));
  CHECK_NIMBLE_ERROR(run_rule(ops::take(), types, {data, i64s({1, 3})}), ErrorKind::runtime_error,
                     "take: index 3 is out of range for axis 0 of data (extent 3) at index [1, 0]");
  CHECK_NIMBLE_ERROR(
      run_rule(ops::take(), types, {data, i64s({-1, 0})}), ErrorKind::runtime_error,
      "take: index -1 is out of range for axis 0 of data (extent 3) at index [0, 0]");
  const std::vector<ir::Type> embedding_types{f32({3, 2}), ir::tensor_type({ir::Any}, DType::i32)};
  const Tensor ids = Tensor::from_data<std::int32_t>({2}, {0, 7});
  CHECK_NIMBLE_ERROR(
      run_rule(ops::embedding(), embedding_types, {data, ids}), ErrorKind::runtime_error,
      "embedding: index 7 is out of range for axis 0 of table (extent 3) at index [1, 0]");
}

TEST_CASE("compute: checked integer division and power raise errors, never trap", "[compute]") {
  const std::vector<ir::Type> types{ir::tensor_type({3}, DType::i32),
                                    ir::tensor_type({3}, DType::i32)};
  const Tensor a = Tensor::from_data<std::int32_t>({3}, {7, -7, 2});
  CHECK_THAT(run_rule(ops::div(), types, {a, Tensor::from_data<std::int32_t>({3}, {2, 2, -3})})[0],
             IsCloseTo(Tensor::from_data<std::int32_t>({3}, {3, -3, 0})));
  CHECK_NIMBLE_ERROR(
      run_rule(ops::div(), types, {a, Tensor::from_data<std::int32_t>({3}, {1, 0, 1})}),
      ErrorKind::runtime_error, "div: integer division by zero at index [1]");
  const std::int32_t min = std::numeric_limits<std::int32_t>::min();
  CHECK_NIMBLE_ERROR(run_rule(ops::div(), types,
                              {Tensor::from_data<std::int32_t>({3}, {1, 1, min}),
                               Tensor::from_data<std::int32_t>({3}, {1, 1, -1})}),
                     ErrorKind::runtime_error, "div: integer overflow: INT_MIN / -1 at index [2]");
  CHECK_NIMBLE_ERROR(
      run_rule(ops::power(), types, {a, Tensor::from_data<std::int32_t>({3}, {2, -1, 0})}),
      ErrorKind::runtime_error, "power: negative exponent in integer power at index [1]");
  // Floating-point division is IEEE: no error.
  const std::vector<ir::Type> float_types{f32({2}), f32({2})};
  CHECK_THAT(
      run_rule(ops::div(), float_types,
               {from_values({2}, DType::f32, {1, 0}), from_values({2}, DType::f32, {0, 0})})[0],
      IsCloseTo(from_values({2}, DType::f32, {kInf, kNaN}), {.equal_nan = true}));
}

TEST_CASE("compute: failed checks name the stage and what the types left open", "[compute]") {
  const Tensor empty_rows = Tensor::zeros(Shape{2, 0}, DType::f32);
  CHECK_NIMBLE_ERROR(
      run_rule(ops::max(), {f32({ir::Any, ir::Any})}, {empty_rows}, {{"axes", Ints{1}}}),
      ErrorKind::invalid_argument, "max: x has no elements along axes [1]");
  CHECK_NIMBLE_ERROR(
      run_rule(ops::argmax(), {f32({ir::Any, ir::Any})}, {empty_rows}, {{"axis", std::int64_t{1}}}),
      ErrorKind::invalid_argument, "argmax: x has no elements along axes [1]");
  // A static empty extent: the check folds to false and fails at run time.
  CHECK_NIMBLE_ERROR(run_rule(ops::min(), {f32({2, 0})}, {empty_rows}, {{"axes", Ints{1}}}),
                     ErrorKind::invalid_argument, "min: x has no elements along axes [1]");
  const Tensor six = Tensor::zeros(Shape{2, 3}, DType::f32);
  CHECK_NIMBLE_ERROR(
      run_rule(ops::reshape(), {f32({ir::Any, 3})}, {six}, {{"newshape", Ints{4, -1}}}),
      ErrorKind::invalid_argument,
      "reshape: x's elements are not a multiple of newshape's other dims");
  CHECK_NIMBLE_ERROR(run_rule(ops::reshape(), {f32({ir::Any, 3})}, {six}, {{"newshape", Ints{5}}}),
                     ErrorKind::invalid_argument, "reshape: x's elements do not match newshape's");
  CHECK_NIMBLE_ERROR(run_rule(ops::squeeze(), {f32({ir::Any, 3})}, {six}, {{"axes", Ints{0}}}),
                     ErrorKind::invalid_argument, "squeeze: axis 0 of x is not 1");
  CHECK_NIMBLE_ERROR(run_rule(ops::zeros(), {ir::tensor_type({2}, DType::i64)}, {i64s({2, -1})},
                              {{"dtype", DType::f32}}),
                     ErrorKind::invalid_argument, "zeros: shape has a negative extent at 1");
  const std::vector<ir::Type> scalars(3, ir::scalar_type(DType::i32));
  const auto i32 = [](std::int32_t v) { return Tensor::scalar<std::int32_t>(v); };
  CHECK_NIMBLE_ERROR(run_rule(ops::arange(), scalars, {i32(0), i32(5), i32(0)}),
                     ErrorKind::runtime_error, "arange: step is 0");
  const std::vector<ir::Type> update_types{f32({ir::Any, 2}), f32({ir::Any, 2}),
                                           ir::scalar_type(DType::i64)};
  CHECK_NIMBLE_ERROR(
      run_rule(ops::dynamic_update_slice(), update_types,
               {Tensor::zeros(Shape{3, 2}, DType::f32), Tensor::zeros(Shape{2, 2}, DType::f32),
                Tensor::scalar<std::int64_t>(2)}),
      ErrorKind::runtime_error, "dynamic_update_slice: update at offset is out of range for dest");
  CHECK_NIMBLE_ERROR(
      run_rule(ops::dense(), {f32({2, ir::Any}), f32({3, ir::Any}), f32({3})},
               {six, Tensor::zeros(Shape{3, 4}, DType::f32), Tensor::zeros(Shape{3}, DType::f32)}),
      ErrorKind::invalid_argument, "dense.acc: x's columns do not match weight's");
}

// --- structure and printing -------------------------------------------------------------------

TEST_CASE("compute: the printer shows a rule's stages, selects and checks", "[compute]") {
  te::SymbolTable symbols;
  const std::vector<te::Tensor> inputs{
      te::placeholder_for(*f32({ir::Any, 3}).as<ir::TensorTypeNode>(), "a", symbols),
      te::placeholder_for(*f32({ir::Dim("m"), 1}).as<ir::TensorTypeNode>(), "b", symbols)};
  CHECK(te::to_string(ops::add().compute(inputs, {})) ==
        "placeholder a: f32[a_d0, 3]\n"
        "placeholder b: f32[m, 1]\n"
        "compute add(i0, i1): f32[select((a_d0 == 1), m, a_d0), 3] = "
        "(a[select((a_d0 == 1), 0, i0), i1] + b[select((m == 1), 0, i0), 0])\n"
        "  check (((a_d0 == m) || (a_d0 == 1)) || (m == 1)) else invalid_argument "
        "\"a, b do not broadcast at dim 0\"\n");

  const te::Tensor h = te::placeholder("h", DType::f16, {te::Var("n"), 4});
  CHECK(te::to_string(ops::sum().compute(std::span(&h, 1), {{"axes", Ints{1}}})) ==
        "placeholder h: f16[n, 4]\n"
        "compute sum.sum(i0): f32[n] = sum(cast(f32, h[i0, k0]) for k0 < 4, init 0:f32)\n"
        "compute sum(i0): f16[n] = cast(f16, sum.sum[i0])\n");
}

TEST_CASE("compute: multi-stage rules list their stages producers first", "[compute]") {
  const te::Tensor x = te::placeholder("x", DType::f32, {te::Var("n"), 8});
  const std::vector<te::Tensor> out = ops::softmax().compute(std::span(&x, 1), {});
  std::vector<std::string> names;
  for (const te::Tensor& t : te::stages(out)) names.push_back(t.name());
  CHECK(names == std::vector<std::string>{"x", "softmax.max", "softmax.sum", "softmax"});
  // A reduce is always a stage's whole body.
  for (const te::Tensor& t : te::stages(out))
    if (!t.is_placeholder())
      CHECK((t->body.kind() == te::ExprKind::reduce) == (t.name() != "softmax"));
  // split: one stage per part, sharing the input.
  const std::vector<te::Tensor> parts = ops::split().compute(
      std::span(&x, 1), {{"sections", std::int64_t{2}}, {"axis", std::int64_t{1}}});
  REQUIRE(parts.size() == 2);
  CHECK(te::to_string(parts[1]) ==
        "placeholder x: f32[n, 8]\ncompute split.1(i0, i1): f32[n, 4] = x[i0, (i1 + 4)]\n");
}

TEST_CASE("compute: constructors fold constants without dropping checks", "[compute]") {
  const te::Var n("n");
  CHECK(te::to_string(te::Expr(2) * 3 + n) == "(6 + n)");
  CHECK(te::to_string(n * 1 + 0) == "n");
  CHECK(te::to_string(te::select(te::eq(te::Expr(4), 1), n, te::Expr(4))) == "4");
  CHECK(te::to_string(te::eq(n, n)) == "true");
  CHECK(te::to_string(te::floordiv(te::Expr(-7), 2)) == "-4");
  CHECK(te::to_string(te::floormod(te::Expr(-7), 2)) == "1");
  CHECK(te::to_string(te::cast(DType::i8, te::Expr(300))) == "44:i8");
  // A checked division is never folded, even on constants.
  CHECK(te::to_string(te::binary(te::BinaryOp::div, te::Expr(1), te::Expr(0), true)) == "(1 /! 0)");
  const te::Tensor t = te::placeholder("t", DType::i64, {3});
  const te::Expr faulting = te::checked_load(t, {n});
  CHECK(te::to_string(faulting * 0) == "(t[n]! * 0)");
  CHECK(te::to_string(te::ravel(std::vector<te::Expr>{n, 2}, std::vector<te::Expr>{4, 3})) ==
        "((n * 3) + 2)");
}

TEST_CASE("compute: the evaluator rounds at stores and follows cast's conversions", "[compute]") {
  // 1 + 2^-30 is not an f32: the stage rounds it.
  const te::Tensor x = te::placeholder("x", DType::f32, {2});
  const te::Tensor y =
      te::compute({2}, "y", [&](std::span<const te::Var> i) { return x({i[0]}) + 0x1p-30; });
  const te::Tensor z = te::compute({2}, "z", [&](std::span<const te::Var> i) {
    return te::cast(DType::i8, te::cast(DType::f64, y({i[0]})) * 1e3);
  });
  const Tensor in = from_values({2}, DType::f32, {1, kNaN});
  const std::vector<Tensor> out =
      te::evaluate(std::vector<te::Tensor>{y, z}, std::span(&x, 1), std::span(&in, 1));
  CHECK(out[0].values<float>()[0] == 1.0f);
  // 1000 saturates to 127; NaN converts to 0.
  CHECK_THAT(out[1], IsCloseTo(Tensor::from_data<std::int8_t>({2}, {127, 0})));
}
