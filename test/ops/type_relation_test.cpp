// Type relations of every op, the operator registry and attribute checks.
#include <catch2/catch.hpp>

#include <iterator>
#include <set>

#include <limits>
#include <string>
#include <vector>

#include "ops/broadcast.hpp"
#include "ops/ops.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using ir::Any;
using ir::Dim;
using ir::Type;

namespace {

Type f32(std::vector<Dim> shape) {
  return ir::tensor_type(std::move(shape), DType::f32);
}
Type f16(std::vector<Dim> shape) {
  return ir::tensor_type(std::move(shape), DType::f16);
}
Type i32(std::vector<Dim> shape) {
  return ir::tensor_type(std::move(shape), DType::i32);
}
Type i64(std::vector<Dim> shape) {
  return ir::tensor_type(std::move(shape), DType::i64);
}
Type boolean(std::vector<Dim> shape) {
  return ir::tensor_type(std::move(shape), DType::boolean);
}
Dim sym(const char* name) {
  return Dim(name);
}

/// The result type of `op` applied to `args`, as IR text.
std::string relate(const ir::OpDef& op, std::vector<Type> args, const ir::Attrs& attrs = {}) {
  return ir::to_string(op.type_relation(args, attrs));
}

/// broadcast_dim as text ("error" when the dims conflict).
std::string bdim(const Dim& a, const Dim& b) {
  const auto d = ops::broadcast_dim(a, b);
  return d ? ir::to_string(*d) : "error";
}

using Ints = std::vector<std::int64_t>;

}  // namespace

// --- registry and attributes -----------------------------------------------------------

TEST_CASE("the registry lists every op once and finds it by name", "[types]") {
  const auto ops = ir::all_ops();
  // Every accessor of ops.def, once each, in its order.
  const ir::OpDef* const declared[] = {
#define NIMBLE_OP(name) &ops::name(),
#include "ops/ops.def"
#undef NIMBLE_OP
  };
  REQUIRE(ops.size() == std::size(declared));
  for (std::size_t i = 0; i < ops.size(); ++i) CHECK(ops[i] == declared[i]);
  CHECK(std::set<const ir::OpDef*>(ops.begin(), ops.end()).size() == ops.size());
  CHECK(ops.front() == &ops::neg());
  CHECK(ops.back() == &ops::dynamic_update_slice());
  for (const ir::OpDef* op : ops) {
    CAPTURE(op->name);
    CHECK(ir::find_op(op->name) == op);
    CHECK(op->type_relation != nullptr);
    CHECK_FALSE(op->arg_names.empty());
  }
  CHECK(ir::find_op("dense") == &ops::dense());
  CHECK(ir::find_op("batch_matmul") == &ops::batch_matmul());
  CHECK(ir::find_op("conv2d") == nullptr);
  CHECK(ir::find_op("") == nullptr);
  // Accessors return one definition.
  CHECK(&ops::add() == &ops::add());
  CHECK(ops::dense().arg_names.size() == 3);
  CHECK(ops::dense().arg_names[1] == "weight");
}

TEST_CASE("attr_or_default returns the call's value or the default", "[types]") {
  const ir::Attrs none;
  CHECK(std::get<bool>(ir::attr_or_default(ops::sum(), none, "keepdims")) == false);
  CHECK(std::get<Ints>(ir::attr_or_default(ops::sum(), none, "axes")).empty());
  CHECK(std::get<std::int64_t>(ir::attr_or_default(ops::softmax(), none, "axis")) == -1);
  CHECK(std::get<double>(ir::attr_or_default(ops::layer_norm(), none, "epsilon")) == 1e-5);
  const ir::Attrs given{{"keepdims", true}, {"axes", Ints{1}}};
  CHECK(std::get<bool>(ir::attr_or_default(ops::sum(), given, "keepdims")) == true);
  CHECK(std::get<Ints>(ir::attr_or_default(ops::sum(), given, "axes")) == Ints{1});
  CHECK(std::get<DType>(ir::attr_or_default(ops::cast(), {{"dtype", DType::i32}}, "dtype")) ==
        DType::i32);
}

TEST_CASE("attribute errors name the op, the attribute and the kind", "[types]") {
  CHECK_NIMBLE_ERROR(ir::attr_or_default(ops::cast(), {}, "dtype"), ErrorKind::type_error,
                     "cast: missing attribute 'dtype'");
  CHECK_NIMBLE_ERROR(ir::attr_or_default(ops::sum(), {{"axes", std::int64_t{1}}}, "axes"),
                     ErrorKind::type_error, "sum: attribute 'axes' must be integers, got 1");
  CHECK_NIMBLE_ERROR(ir::attr_or_default(ops::argmax(), {{"axis", Ints{1, 2}}}, "axis"),
                     ErrorKind::type_error, "argmax: attribute 'axis' must be integer, got [1, 2]");
  CHECK_NIMBLE_ERROR(ir::attr_or_default(ops::sum(), {{"keepdims", std::int64_t{1}}}, "keepdims"),
                     ErrorKind::type_error, "sum: attribute 'keepdims' must be boolean, got 1");

  CHECK_NOTHROW(ir::check_attrs(ops::add(), {}));
  CHECK_NOTHROW(ir::check_attrs(ops::sum(), {{"axes", Ints{0}}, {"keepdims", true}}));
  CHECK_NIMBLE_ERROR(ir::check_attrs(ops::add(), {{"axis", std::int64_t{1}}}),
                     ErrorKind::type_error, "add: unknown attribute 'axis'");
  CHECK_NIMBLE_ERROR(ir::check_attrs(ops::reshape(), {}), ErrorKind::type_error,
                     "reshape: missing attribute 'newshape'");
  CHECK_NIMBLE_ERROR(ir::check_attrs(ops::layer_norm(), {{"epsilon", std::int64_t{1}}}),
                     ErrorKind::type_error, "layer_norm: attribute 'epsilon' must be real, got 1");
  CHECK_NIMBLE_ERROR(ir::check_attrs(ops::cast(), {{"dtype", std::string("f32")}}),
                     ErrorKind::type_error, "cast: attribute 'dtype' must be dtype, got \"f32\"");
}

// --- broadcasting ------------------------------------------------------------------------

TEST_CASE("broadcasting of two dims follows numpy with Any and symbols", "[types]") {
  const Dim n = sym("n"), m = sym("m");
  // Equal dims.
  CHECK(bdim(3, 3) == "3");
  CHECK(bdim(1, 1) == "1");
  CHECK(bdim(n, n) == "n");
  CHECK(bdim(Any, Any) == "?");
  CHECK(bdim(Dim("n", 512), n) == "n<=512");
  CHECK(bdim(n, Dim("n", 512)) == "n<=512");
  // 1 against anything.
  CHECK(bdim(1, 5) == "5");
  CHECK(bdim(5, 1) == "5");
  CHECK(bdim(1, Any) == "?");
  CHECK(bdim(Any, 1) == "?");
  CHECK(bdim(1, n) == "n");
  CHECK(bdim(n, 1) == "n");
  // Two different constants.
  CHECK(bdim(2, 3) == "error");
  CHECK(bdim(0, 3) == "error");
  // Unknown against a constant: the constant (checked at run time).
  CHECK(bdim(Any, 4) == "4");
  CHECK(bdim(4, Any) == "4");
  CHECK(bdim(n, 4) == "4");
  CHECK(bdim(4, n) == "4");
  CHECK(bdim(0, Any) == "0");
  // Unknown against unknown: either may be 1.
  CHECK(bdim(n, Any) == "?");
  CHECK(bdim(Any, n) == "?");
  CHECK(bdim(n, m) == "?");
}

TEST_CASE("binary ops broadcast shapes, extending the shorter rank", "[types]") {
  const Dim n = sym("n");
  CHECK(relate(ops::add(), {f32({2, 3}), f32({2, 3})}) == "f32[2, 3]");
  CHECK(relate(ops::add(), {f32({n, 768}), f32({768})}) == "f32[n, 768]");
  CHECK(relate(ops::add(), {f32({768}), f32({n, 1})}) == "f32[n, 768]");
  CHECK(relate(ops::mul(), {f32({Any, 1, 5}), f32({4, 1})}) == "f32[?, 4, 5]");
  CHECK(relate(ops::sub(), {f32({}), f32({n, Any})}) == "f32[n, ?]");
  CHECK(relate(ops::div(), {f32({n, 3}), f32({Any, 3})}) == "f32[?, 3]");
  CHECK(relate(ops::maximum(), {f32({n, 1}), f32({1, n})}) == "f32[n, n]");
  CHECK(relate(ops::minimum(), {f32({Any}), f32({7})}) == "f32[7]");
  CHECK(relate(ops::power(), {f32({1, 1, 1}), f32({})}) == "f32[1, 1, 1]");
  CHECK(relate(ops::add(), {i32({2}), i32({1})}) == "i32[2]");
  CHECK(relate(ops::mul(), {f32({2, sym("m")}), f32({n})}) == "f32[2, ?]");
}

TEST_CASE("broadcast errors name both arguments and the result dim", "[types]") {
  CHECK_NIMBLE_ERROR(relate(ops::add(), {f32({2, 3}), f32({4, 3})}), ErrorKind::type_error,
                     "a f32[2, 3] and b f32[4, 3] do not broadcast: dim 0 is 2 vs 4");
  CHECK_NIMBLE_ERROR(relate(ops::add(), {f32({5, 2, 3}), f32({4})}), ErrorKind::type_error,
                     "a f32[5, 2, 3] and b f32[4] do not broadcast: dim 2 is 3 vs 4");
  CHECK_NIMBLE_ERROR(relate(ops::mul(), {f32({Any, 3}), f32({sym("n"), 2})}), ErrorKind::type_error,
                     "a f32[?, 3] and b f32[n, 2] do not broadcast: dim 1 is 3 vs 2");
  CHECK_NIMBLE_ERROR(relate(ops::sub(), {f32({2}), i32({2})}), ErrorKind::type_error,
                     "a is f32 but b is i32");
  CHECK_NIMBLE_ERROR(relate(ops::add(), {boolean({2}), boolean({2})}), ErrorKind::type_error,
                     "a must be a numeric tensor, got bool[2]");
  CHECK_NIMBLE_ERROR(relate(ops::add(), {ir::adt_type("List", {f32({2})}), f32({2})}),
                     ErrorKind::type_error, "a must be a tensor, got List<f32[2]>");
  CHECK_NIMBLE_ERROR(relate(ops::add(), {f32({2}), ir::tuple_type({f32({2})})}),
                     ErrorKind::type_error, "b must be a tensor, got (f32[2],)");
}

TEST_CASE("comparisons give bool, logical ops take bool, where broadcasts three", "[types]") {
  const Dim n = sym("n");
  CHECK(relate(ops::equal(), {f32({n, 3}), f32({3})}) == "bool[n, 3]");
  CHECK(relate(ops::not_equal(), {i64({}), i64({4})}) == "bool[4]");
  CHECK(relate(ops::less(), {f32({2}), f32({2})}) == "bool[2]");
  CHECK(relate(ops::less_equal(), {f32({Any}), f32({2})}) == "bool[2]");
  CHECK(relate(ops::greater(), {i32({1, 2}), i32({3, 1})}) == "bool[3, 2]");
  CHECK(relate(ops::greater_equal(), {boolean({2}), boolean({2})}) == "bool[2]");
  CHECK(relate(ops::logical_and(), {boolean({n}), boolean({})}) == "bool[n]");
  CHECK(relate(ops::logical_or(), {boolean({2, 1}), boolean({3})}) == "bool[2, 3]");
  CHECK_NIMBLE_ERROR(relate(ops::less(), {f32({2}), f16({2})}), ErrorKind::type_error,
                     "a is f32 but b is f16");
  CHECK_NIMBLE_ERROR(relate(ops::logical_and(), {boolean({2}), f32({2})}), ErrorKind::type_error,
                     "b must be bool, got f32[2]");
  CHECK_NIMBLE_ERROR(relate(ops::logical_or(), {i32({2}), boolean({2})}), ErrorKind::type_error,
                     "a must be bool, got i32[2]");

  CHECK(relate(ops::where(), {boolean({n, 1}), f32({1, 4}), f32({4})}) == "f32[n, 4]");
  CHECK(relate(ops::where(), {boolean({}), i64({Any}), i64({3})}) == "i64[3]");
  CHECK_NIMBLE_ERROR(relate(ops::where(), {f32({2}), f32({2}), f32({2})}), ErrorKind::type_error,
                     "cond must be bool, got f32[2]");
  CHECK_NIMBLE_ERROR(relate(ops::where(), {boolean({2}), f32({2}), i32({2})}),
                     ErrorKind::type_error, "x is f32 but y is i32");
  CHECK_NIMBLE_ERROR(relate(ops::where(), {boolean({3}), f32({1}), f32({4})}),
                     ErrorKind::type_error,
                     "cond bool[3] and y f32[4] do not broadcast: dim 0 is 3 vs 4");
}

// --- elementwise ----------------------------------------------------------------------------

TEST_CASE("unary ops keep the type; most take floating point only", "[types]") {
  const Type x = f32({sym("n"), Any, 3});
  for (const ir::OpDef* op : {&ops::exp(), &ops::log(), &ops::sqrt(), &ops::rsqrt(), &ops::tanh(),
                              &ops::sigmoid(), &ops::relu(), &ops::gelu(), &ops::erf()}) {
    CAPTURE(op->name);
    CHECK(relate(*op, {x}) == "f32[n, ?, 3]");
    CHECK(relate(*op, {f16({})}) == "f16[]");
    CHECK_NIMBLE_ERROR(relate(*op, {i32({3})}), ErrorKind::type_error,
                       "x must be a floating-point tensor, got i32[3]");
  }
  CHECK(relate(ops::neg(), {i32({3})}) == "i32[3]");
  CHECK(relate(ops::abs(), {x}) == "f32[n, ?, 3]");
  CHECK_NIMBLE_ERROR(relate(ops::neg(), {boolean({3})}), ErrorKind::type_error,
                     "x must be a numeric tensor, got bool[3]");
  CHECK_NIMBLE_ERROR(relate(ops::sigmoid(), {ir::tuple_type({})}), ErrorKind::type_error,
                     "x must be a tensor, got ()");

  CHECK(relate(ops::cast(), {x}, {{"dtype", DType::i64}}) == "i64[n, ?, 3]");
  CHECK(relate(ops::cast(), {boolean({})}, {{"dtype", DType::f16}}) == "f16[]");
  CHECK_NIMBLE_ERROR(relate(ops::cast(), {x}), ErrorKind::type_error,
                     "cast: missing attribute 'dtype'");

  CHECK(relate(ops::logical_not(), {boolean({2, Any})}) == "bool[2, ?]");
  CHECK_NIMBLE_ERROR(relate(ops::logical_not(), {f32({2})}), ErrorKind::type_error,
                     "x must be bool, got f32[2]");
}

// --- reductions --------------------------------------------------------------------------------

TEST_CASE("reductions over axes, keepdims and negative axes", "[types]") {
  const Type x = f32({sym("n"), Any, 4});
  CHECK(relate(ops::sum(), {x}) == "f32[]");
  CHECK(relate(ops::sum(), {x}, {{"keepdims", true}}) == "f32[1, 1, 1]");
  CHECK(relate(ops::sum(), {x}, {{"axes", Ints{1}}}) == "f32[n, 4]");
  CHECK(relate(ops::mean(), {x}, {{"axes", Ints{-1}}}) == "f32[n, ?]");
  CHECK(relate(ops::max(), {x}, {{"axes", Ints{0, -1}}, {"keepdims", true}}) == "f32[1, ?, 1]");
  CHECK(relate(ops::min(), {i32({2, 3})}, {{"axes", Ints{0}}}) == "i32[3]");
  CHECK(relate(ops::sum(), {f32({})}) == "f32[]");
  CHECK_NIMBLE_ERROR(relate(ops::sum(), {x}, {{"axes", Ints{3}}}), ErrorKind::type_error,
                     "axis 3 is out of range for rank 3");
  CHECK_NIMBLE_ERROR(relate(ops::sum(), {x}, {{"axes", Ints{-4}}}), ErrorKind::type_error,
                     "axis -4 is out of range for rank 3");
  CHECK_NIMBLE_ERROR(relate(ops::max(), {x}, {{"axes", Ints{2, -1}}}), ErrorKind::type_error,
                     "axes [2, -1] name axis 2 twice");
  CHECK_NIMBLE_ERROR(relate(ops::mean(), {i32({2})}), ErrorKind::type_error,
                     "x must be a floating-point tensor, got i32[2]");
  CHECK_NIMBLE_ERROR(relate(ops::sum(), {boolean({2})}), ErrorKind::type_error,
                     "x must be a numeric tensor, got bool[2]");

  CHECK(relate(ops::argmax(), {x}, {{"axis", std::int64_t{-1}}}) == "i64[n, ?]");
  CHECK(relate(ops::argmax(), {x}, {{"axis", std::int64_t{0}}, {"keepdims", true}}) ==
        "i64[1, ?, 4]");
  CHECK_NIMBLE_ERROR(relate(ops::argmax(), {x}), ErrorKind::type_error,
                     "argmax: missing attribute 'axis'");
  CHECK_NIMBLE_ERROR(relate(ops::argmax(), {f32({})}, {{"axis", std::int64_t{0}}}),
                     ErrorKind::type_error, "axis 0 is out of range for rank 0");
}

TEST_CASE("softmax, log_softmax and layer_norm keep x's type", "[types]") {
  const Dim n = sym("n");
  CHECK(relate(ops::softmax(), {f32({n, 12, n})}) == "f32[n, 12, n]");
  CHECK(relate(ops::log_softmax(), {f32({2, 5})}, {{"axis", std::int64_t{0}}}) == "f32[2, 5]");
  CHECK_NIMBLE_ERROR(relate(ops::softmax(), {f32({2})}, {{"axis", std::int64_t{1}}}),
                     ErrorKind::type_error, "axis 1 is out of range for rank 1");
  CHECK_NIMBLE_ERROR(relate(ops::log_softmax(), {i64({2})}), ErrorKind::type_error,
                     "x must be a floating-point tensor, got i64[2]");

  CHECK(relate(ops::layer_norm(), {f32({n, 768}), f32({768}), f32({768})}) == "f32[n, 768]");
  // gamma's static extent refines x's unknown one.
  CHECK(relate(ops::layer_norm(), {f32({n, Any}), f32({768}), f32({Any})}) == "f32[n, 768]");
  CHECK(relate(ops::layer_norm(), {f32({4, n}), f32({4}), f32({4})}, {{"axis", std::int64_t{0}}}) ==
        "f32[4, n]");
  CHECK_NIMBLE_ERROR(relate(ops::layer_norm(), {f32({n, 768}), f32({512}), f32({768})}),
                     ErrorKind::type_error, "gamma has 512 elements but x's axis -1 has 768");
  CHECK_NIMBLE_ERROR(relate(ops::layer_norm(), {f32({n, 768}), f32({768}), f32({1, 768})}),
                     ErrorKind::type_error, "beta must have rank 1, got f32[1, 768]");
  CHECK_NIMBLE_ERROR(relate(ops::layer_norm(), {f32({n, 768}), f16({768}), f32({768})}),
                     ErrorKind::type_error, "x is f32 but gamma is f16");
  CHECK_NIMBLE_ERROR(
      relate(ops::layer_norm(), {f32({768}), f32({768}), f32({768})}, {{"epsilon", 0.0}}),
      ErrorKind::type_error, "epsilon must be > 0, got 0");
}

// --- linear algebra ----------------------------------------------------------------------------

TEST_CASE("dense maps [..., k] to [..., n]", "[types]") {
  const Dim n = sym("n");
  CHECK(relate(ops::dense(), {f32({n, 512}), f32({300, 512}), f32({300})}) == "f32[n, 300]");
  CHECK(relate(ops::dense(), {f32({2, n, 768}), f32({3072, 768}), f32({3072})}) ==
        "f32[2, n, 3072]");
  CHECK(relate(ops::dense(), {f32({512}), f32({10, 512}), f32({10})}) == "f32[10]");
  // Unknown dims unify with known ones; the result takes the most specific.
  CHECK(relate(ops::dense(), {f32({n, Any}), f32({Any, 512}), f32({10})}) == "f32[n, 10]");
  CHECK(relate(ops::dense(), {f32({4, sym("k")}), f32({sym("h"), 8}), f32({Any})}) == "f32[4, h]");

  CHECK_NIMBLE_ERROR(relate(ops::dense(), {f32({n, 300}), f32({10, 512}), f32({10})}),
                     ErrorKind::type_error, "x has 300 columns but weight expects 512");
  CHECK_NIMBLE_ERROR(relate(ops::dense(), {f32({n, 512}), f32({20, 512}), f32({10})}),
                     ErrorKind::type_error, "bias has 10 elements but weight has 20 rows");
  CHECK_NIMBLE_ERROR(relate(ops::dense(), {f32({}), f32({10, 512}), f32({10})}),
                     ErrorKind::type_error, "x must have rank >= 1, got f32[]");
  CHECK_NIMBLE_ERROR(relate(ops::dense(), {f32({2, 512}), f32({512}), f32({10})}),
                     ErrorKind::type_error, "weight must have rank 2, got f32[512]");
  CHECK_NIMBLE_ERROR(relate(ops::dense(), {f32({2, 512}), f32({10, 512}), f32({1, 10})}),
                     ErrorKind::type_error, "bias must have rank 1, got f32[1, 10]");
  CHECK_NIMBLE_ERROR(relate(ops::dense(), {f32({2, 512}), f16({10, 512}), f32({10})}),
                     ErrorKind::type_error, "x is f32 but weight is f16");
  CHECK_NIMBLE_ERROR(relate(ops::dense(), {f32({2, 512}), ir::tuple_type({}), f32({10})}),
                     ErrorKind::type_error, "weight must be a tensor, got ()");
}

TEST_CASE("matmul and batch_matmul with transposes and a broadcast batch", "[types]") {
  const Dim n = sym("n");
  CHECK(relate(ops::matmul(), {f32({n, 64}), f32({64, 10})}) == "f32[n, 10]");
  CHECK(relate(ops::matmul(), {f32({64, n}), f32({64, 10})}, {{"transpose_a", true}}) ==
        "f32[n, 10]");
  CHECK(relate(ops::matmul(), {f32({n, 64}), f32({10, 64})}, {{"transpose_b", true}}) ==
        "f32[n, 10]");
  CHECK(relate(ops::matmul(), {f32({64, 3}), f32({5, 64})},
               {{"transpose_a", true}, {"transpose_b", true}}) == "f32[3, 5]");
  CHECK(relate(ops::matmul(), {f32({2, Any}), f32({n, 3})}) == "f32[2, 3]");
  CHECK_NIMBLE_ERROR(relate(ops::matmul(), {f32({2, 3}), f32({4, 5})}), ErrorKind::type_error,
                     "a f32[2, 3] has k = 3 but b f32[4, 5] has k = 4");
  CHECK_NIMBLE_ERROR(relate(ops::matmul(), {f32({2, 3}), f32({3, 5})}, {{"transpose_a", true}}),
                     ErrorKind::type_error, "a f32[2, 3] has k = 2 but b f32[3, 5] has k = 3");
  CHECK_NIMBLE_ERROR(relate(ops::matmul(), {f32({2, 3, 4}), f32({4, 5})}), ErrorKind::type_error,
                     "a must have rank 2, got f32[2, 3, 4]");
  CHECK_NIMBLE_ERROR(relate(ops::matmul(), {i32({2, 3}), f32({3, 5})}), ErrorKind::type_error,
                     "a is i32 but b is f32");

  CHECK(relate(ops::batch_matmul(), {f32({12, n, 64}), f32({12, 64, n})}) == "f32[12, n, n]");
  CHECK(relate(ops::batch_matmul(), {f32({1, n, 64}), f32({12, 64, 8})}) == "f32[12, n, 8]");
  CHECK(relate(ops::batch_matmul(), {f32({Any, n, 64}), f32({1, n, 64})},
               {{"transpose_b", true}}) == "f32[?, n, n]");
  CHECK(relate(ops::batch_matmul(), {f32({sym("b"), 64, n}), f32({4, 64, 7})},
               {{"transpose_a", true}}) == "f32[4, n, 7]");
  CHECK_NIMBLE_ERROR(relate(ops::batch_matmul(), {f32({2, 3, 4}), f32({5, 4, 6})}),
                     ErrorKind::type_error,
                     "a f32[2, 3, 4] and b f32[5, 4, 6] do not broadcast: dim 0 is 2 vs 5");
  CHECK_NIMBLE_ERROR(relate(ops::batch_matmul(), {f32({2, 3, 4}), f32({2, 5, 6})}),
                     ErrorKind::type_error,
                     "a f32[2, 3, 4] has k = 4 but b f32[2, 5, 6] has k = 5");
  CHECK_NIMBLE_ERROR(relate(ops::batch_matmul(), {f32({3, 4}), f32({2, 4, 6})}),
                     ErrorKind::type_error, "a must have rank 3, got f32[3, 4]");
}

// --- shape and data movement --------------------------------------------------------------------

TEST_CASE("reshape infers -1, copies 0 and keeps symbols that cancel", "[types]") {
  const Dim n = sym("n");
  const auto reshape = [](Type x, Ints newshape, bool allow_zero = false) {
    return relate(ops::reshape(), {std::move(x)},
                  {{"newshape", std::move(newshape)}, {"allow_zero", allow_zero}});
  };
  CHECK(reshape(f32({2, 3, 4}), {6, 4}) == "f32[6, 4]");
  CHECK(reshape(f32({2, 3, 4}), {-1}) == "f32[24]");
  CHECK(reshape(f32({2, 3, 4}), {4, -1}) == "f32[4, 6]");
  CHECK(reshape(f32({2, 3, 4}), {0, -1}) == "f32[2, 12]");
  CHECK(reshape(f32({n, 768}), {0, 12, 64}) == "f32[n, 12, 64]");
  CHECK(reshape(f32({n, 768}), {-1, 12, 64}) == "f32[n, 12, 64]");
  CHECK(reshape(f32({n, 12, 64}), {0, -1}) == "f32[n, 768]");
  CHECK(reshape(f32({n, 12, 64}), {-1, 768}) == "f32[n, 768]");
  CHECK(reshape(f32({Dim("n", 512), 4}), {-1}) == "f32[?]");
  CHECK(reshape(f32({Dim("n", 512), 4}), {4, -1}) == "f32[4, n<=512]");
  CHECK(reshape(f32({Any, 768}), {0, 12, 64}) == "f32[?, 12, 64]");
  CHECK(reshape(f32({Any, 768}), {-1, 64}) == "f32[?, 64]");
  CHECK(reshape(f32({n, 4}), {2, -1}) == "f32[2, ?]");
  CHECK(reshape(f32({n, sym("m")}), {-1, 0}) == "f32[n, m]");
  CHECK(reshape(f32({n, sym("m")}), {0, 0, 1}) == "f32[n, m, 1]");
  CHECK(reshape(f32({2, 0, 3}), {0, -1}) == "f32[2, ?]");
  CHECK(reshape(f32({2, 0, 3}), {3, 0}, true) == "f32[3, 0]");
  CHECK(reshape(f32({0, 3}), {0, 5}, true) == "f32[0, 5]");
  CHECK(reshape(f32({}), {1, 1}) == "f32[1, 1]");
  CHECK(reshape(f32({1, 1}), {}) == "f32[]");
  CHECK(reshape(f32({n, n}), {-1}) == "f32[?]");

  CHECK_NIMBLE_ERROR(reshape(f32({2, 3}), {4, 2}), ErrorKind::type_error,
                     "x f32[2, 3] has 6 elements but newshape [4, 2] has 8");
  CHECK_NIMBLE_ERROR(reshape(f32({2, 3}), {0, 0}, true), ErrorKind::type_error,
                     "x f32[2, 3] has 6 elements but newshape [0, 0] has 0");
  CHECK_NIMBLE_ERROR(reshape(f32({5, 3}), {4, -1}), ErrorKind::type_error,
                     "x f32[5, 3] cannot be reshaped to [4, -1]: 15 elements are not a multiple "
                     "of 4");
  CHECK_NIMBLE_ERROR(reshape(f32({n, 3}), {-1, -1}), ErrorKind::type_error,
                     "newshape [-1, -1] has more than one -1");
  CHECK_NIMBLE_ERROR(reshape(f32({n, 3}), {3, -2}), ErrorKind::type_error,
                     "newshape [3, -2] has a negative dim -2");
  CHECK_NIMBLE_ERROR(reshape(f32({n, 3}), {1, 1, 0}), ErrorKind::type_error,
                     "newshape [1, 1, 0] copies dim 2 but x f32[n, 3] has rank 2");
  CHECK_NIMBLE_ERROR(relate(ops::reshape(), {f32({2})}), ErrorKind::type_error,
                     "reshape: missing attribute 'newshape'");
}

TEST_CASE("transpose, expand_dims and squeeze", "[types]") {
  const Dim n = sym("n");
  const Type x = f32({n, 12, Any});
  CHECK(relate(ops::transpose(), {x}) == "f32[?, 12, n]");
  CHECK(relate(ops::transpose(), {x}, {{"axes", Ints{1, 0, 2}}}) == "f32[12, n, ?]");
  CHECK(relate(ops::transpose(), {x}, {{"axes", Ints{0, -1, 1}}}) == "f32[n, ?, 12]");
  CHECK(relate(ops::transpose(), {f32({})}) == "f32[]");
  CHECK_NIMBLE_ERROR(relate(ops::transpose(), {x}, {{"axes", Ints{1, 0}}}), ErrorKind::type_error,
                     "axes [1, 0] is not a permutation of the 3 axes of x");
  CHECK_NIMBLE_ERROR(relate(ops::transpose(), {x}, {{"axes", Ints{1, 0, 1}}}),
                     ErrorKind::type_error, "axes [1, 0, 1] name axis 1 twice");
  CHECK_NIMBLE_ERROR(relate(ops::transpose(), {x}, {{"axes", Ints{0, 1, 3}}}),
                     ErrorKind::type_error, "axis 3 is out of range for rank 3");

  const auto expand = [](Type t, std::int64_t axis) {
    return relate(ops::expand_dims(), {std::move(t)}, {{"axis", axis}});
  };
  CHECK(expand(f32({n, 3}), 0) == "f32[1, n, 3]");
  CHECK(expand(f32({n, 3}), 2) == "f32[n, 3, 1]");
  CHECK(expand(f32({n, 3}), -1) == "f32[n, 3, 1]");
  CHECK(expand(f32({n, 3}), -2) == "f32[n, 1, 3]");
  CHECK(expand(f32({}), 0) == "f32[1]");
  CHECK_NIMBLE_ERROR(expand(f32({n, 3}), 3), ErrorKind::type_error,
                     "axis 3 is out of range for rank 3");

  CHECK(relate(ops::squeeze(), {f32({1, 4, 1})}) == "f32[4]");
  // With a dynamic dim, empty axes would give a rank known only at run time.
  CHECK_NIMBLE_ERROR(relate(ops::squeeze(), {f32({1, n, 1, Any})}), ErrorKind::type_error,
                     "x f32[1, n, 1, ?] has a dynamic dim 1: name the axes to squeeze");
  CHECK(relate(ops::squeeze(), {f32({1, n, 1})}, {{"axes", Ints{-1}}}) == "f32[1, n]");
  CHECK(relate(ops::squeeze(), {f32({1, n, Any})}, {{"axes", Ints{1, 2}}}) == "f32[1]");
  CHECK_NIMBLE_ERROR(relate(ops::squeeze(), {f32({1, 2})}, {{"axes", Ints{1}}}),
                     ErrorKind::type_error, "axis 1 of x f32[1, 2] is 2, not 1");
}

TEST_CASE("concatenate over a tuple sums static extents along the axis", "[types]") {
  const Dim n = sym("n");
  const auto concat = [](std::vector<Type> fields, std::int64_t axis) {
    return relate(ops::concatenate(), {ir::tuple_type(std::move(fields))}, {{"axis", axis}});
  };
  CHECK(concat({f32({2, 3}), f32({4, 3})}, 0) == "f32[6, 3]");
  CHECK(concat({f32({2, 3}), f32({2, 1}), f32({2, 0})}, -1) == "f32[2, 4]");
  CHECK(concat({f32({2, 3})}, 0) == "f32[2, 3]");
  CHECK(concat({f32({n, 3}), f32({2, 3})}, 0) == "f32[?, 3]");
  CHECK(concat({f32({Any, 3}), f32({2, 3})}, 0) == "f32[?, 3]");
  CHECK(concat({f32({n, 3}), f32({n, 3})}, 0) == "f32[?, 3]");
  // Off the axis, dims unify to the most specific.
  CHECK(concat({f32({n, 3}), f32({Any, 5}), f32({4, 1})}, 1) == "f32[4, 9]");
  CHECK(concat({f32({Any, 3}), f32({n, 5})}, 1) == "f32[n, 8]");

  CHECK_NIMBLE_ERROR(concat({f32({2, 3}), f32({2, 3, 1})}, 0), ErrorKind::type_error,
                     "fields.1 has rank 3 but fields.0 has rank 2");
  CHECK_NIMBLE_ERROR(concat({f32({2, 3}), i32({2, 3})}, 0), ErrorKind::type_error,
                     "fields.0 is f32 but fields.1 is i32");
  CHECK_NIMBLE_ERROR(concat({f32({2, 3}), f32({2, 4})}, 0), ErrorKind::type_error,
                     "fields.1 has 4 at dim 1 but fields.0 has 3");
  CHECK_NIMBLE_ERROR(concat({f32({2, Any}), f32({2, 4}), f32({2, 5})}, 0), ErrorKind::type_error,
                     "fields.2 has 5 at dim 1 but fields.1 has 4");
  CHECK_NIMBLE_ERROR(concat({f32({2, 3}), f32({2, 3})}, 2), ErrorKind::type_error,
                     "axis 2 is out of range for rank 2");
  CHECK_NIMBLE_ERROR(concat({}, 0), ErrorKind::type_error,
                     "fields must be a tuple of tensors, got ()");
  CHECK_NIMBLE_ERROR(relate(ops::concatenate(), {f32({2})}, {{"axis", std::int64_t{0}}}),
                     ErrorKind::type_error, "fields must be a tuple of tensors, got f32[2]");
  CHECK_NIMBLE_ERROR(concat({f32({2}), ir::adt_type("List", {f32({2})})}, 0), ErrorKind::type_error,
                     "fields.1 must be a tensor, got List<f32[2]>");
  CHECK_NIMBLE_ERROR(relate(ops::concatenate(), {ir::tuple_type({f32({2})})}),
                     ErrorKind::type_error, "concatenate: missing attribute 'axis'");
}

TEST_CASE("split by sections or indices gives a tuple", "[types]") {
  const Dim n = sym("n");
  const Type x = f32({n, 12});
  CHECK(relate(ops::split(), {x}, {{"sections", std::int64_t{3}}, {"axis", std::int64_t{1}}}) ==
        "(f32[n, 4], f32[n, 4], f32[n, 4])");
  CHECK(relate(ops::split(), {x}, {{"sections", std::int64_t{2}}, {"axis", std::int64_t{0}}}) ==
        "(f32[?, 12], f32[?, 12])");
  CHECK(relate(ops::split(), {x}, {{"sections", std::int64_t{1}}, {"axis", std::int64_t{0}}}) ==
        "(f32[n, 12],)");
  CHECK(relate(ops::split(), {x}, {{"indices", Ints{2, 5}}, {"axis", std::int64_t{-1}}}) ==
        "(f32[n, 2], f32[n, 3], f32[n, 7])");
  CHECK(relate(ops::split(), {x}, {{"indices", Ints{4, 4, 12}}, {"axis", std::int64_t{1}}}) ==
        "(f32[n, 4], f32[n, 0], f32[n, 8], f32[n, 0])");
  CHECK(relate(ops::split(), {x}, {{"indices", Ints{1}}, {"axis", std::int64_t{0}}}) ==
        "(f32[1, 12], f32[?, 12])");

  CHECK_NIMBLE_ERROR(
      relate(ops::split(), {x}, {{"sections", std::int64_t{5}}, {"axis", std::int64_t{1}}}),
      ErrorKind::type_error, "axis 1 of x f32[n, 12] has 12 elements, not divisible into 5");
  CHECK_NIMBLE_ERROR(
      relate(ops::split(), {x}, {{"sections", std::int64_t{-1}}, {"axis", std::int64_t{1}}}),
      ErrorKind::type_error, "sections must be > 0, got -1");
  CHECK_NIMBLE_ERROR(relate(ops::split(), {x}, {{"axis", std::int64_t{1}}}), ErrorKind::type_error,
                     "give either sections (> 0) or indices, got neither");
  CHECK_NIMBLE_ERROR(
      relate(ops::split(), {x},
             {{"sections", std::int64_t{2}}, {"indices", Ints{1}}, {"axis", std::int64_t{1}}}),
      ErrorKind::type_error, "give either sections (> 0) or indices, got both");
  CHECK_NIMBLE_ERROR(
      relate(ops::split(), {x}, {{"indices", Ints{5, 2}}, {"axis", std::int64_t{1}}}),
      ErrorKind::type_error, "indices [5, 2] must be >= 0 and ascending");
  CHECK_NIMBLE_ERROR(
      relate(ops::split(), {x}, {{"indices", Ints{2, 13}}, {"axis", std::int64_t{1}}}),
      ErrorKind::type_error, "indices [2, 13] go past the 12 elements of axis 1 of x f32[n, 12]");
  CHECK_NIMBLE_ERROR(relate(ops::split(), {x}, {{"sections", std::int64_t{2}}}),
                     ErrorKind::type_error, "split: missing attribute 'axis'");
}

TEST_CASE("strided_slice with static bounds; dynamic_strided_slice", "[types]") {
  const Dim n = sym("n");
  const auto slice = [](Type x, ir::Attrs attrs) {
    return relate(ops::strided_slice(), {std::move(x)}, attrs);
  };
  const std::int64_t kEnd = std::numeric_limits<std::int64_t>::max();
  CHECK(slice(f32({10, 8}), {{"begin", Ints{2}}, {"end", Ints{7}}}) == "f32[5, 8]");
  CHECK(
      slice(f32({10, 8}), {{"begin", Ints{0, 1}}, {"end", Ints{10, 8}}, {"strides", Ints{3, 2}}}) ==
      "f32[4, 4]");
  CHECK(slice(f32({10, 8}), {{"begin", Ints{-3}}, {"end", Ints{kEnd}}, {"axes", Ints{1}}}) ==
        "f32[10, 3]");
  CHECK(slice(f32({10}), {{"begin", Ints{7}}, {"end", Ints{2}}}) == "f32[0]");
  CHECK(slice(f32({10}), {{"begin", Ints{20}}, {"end", Ints{30}}}) == "f32[0]");
  CHECK(slice(f32({n, 8}), {{"begin", Ints{0, 0}}, {"end", Ints{kEnd, 4}}}) == "f32[n, 4]");
  CHECK(slice(f32({Dim("n", 64), 8}), {{"begin", Ints{0}}, {"end", Ints{64}}}) == "f32[n<=64, 8]");
  CHECK(slice(f32({n, 8}), {{"begin", Ints{1}}, {"end", Ints{kEnd}}}) == "f32[?, 8]");
  CHECK(slice(f32({Any, 8}), {{"begin", Ints{0}}, {"end", Ints{4}}}) == "f32[?, 8]");

  CHECK_NIMBLE_ERROR(slice(f32({10}), {{"begin", Ints{0}}, {"end", Ints{1, 2}}}),
                     ErrorKind::type_error, "begin [0] and end [1, 2] differ in length");
  CHECK_NIMBLE_ERROR(
      slice(f32({10}), {{"begin", Ints{0}}, {"end", Ints{1}}, {"strides", Ints{1, 1}}}),
      ErrorKind::type_error, "begin [0] and strides [1, 1] differ in length");
  CHECK_NIMBLE_ERROR(slice(f32({10}), {{"begin", Ints{0}}, {"end", Ints{1}}, {"strides", Ints{0}}}),
                     ErrorKind::type_error, "strides [0] must all be positive");
  CHECK_NIMBLE_ERROR(
      slice(f32({10}), {{"begin", Ints{5}}, {"end", Ints{0}}, {"strides", Ints{-1}}}),
      ErrorKind::type_error, "strides [-1] must all be positive");
  CHECK_NIMBLE_ERROR(slice(f32({10}), {{"begin", Ints{0, 0}}, {"end", Ints{1, 1}}}),
                     ErrorKind::type_error, "begin [0, 0] slices 2 axes but x f32[10] has rank 1");
  CHECK_NIMBLE_ERROR(slice(f32({10}), {{"begin", Ints{0}}, {"end", Ints{1}}, {"axes", Ints{1}}}),
                     ErrorKind::type_error, "axis 1 is out of range for rank 1");
  CHECK_NIMBLE_ERROR(slice(f32({10}), {{"end", Ints{1}}}), ErrorKind::type_error,
                     "strided_slice: missing attribute 'begin'");

  CHECK(relate(ops::dynamic_strided_slice(), {f32({n, 8, 3}), i64({2}), i64({2})}) ==
        "f32[?, ?, 3]");
  CHECK(relate(ops::dynamic_strided_slice(), {f32({n}), i64({0}), i64({0})}) == "f32[n]");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_strided_slice(), {f32({n}), i64({Any}), i64({1})}),
                     ErrorKind::type_error,
                     "begin must be an i64 vector of static length, got i64[?]");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_strided_slice(), {f32({n}), i64({1}), i32({1})}),
                     ErrorKind::type_error,
                     "end must be an i64 vector of static length, got i32[1]");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_strided_slice(), {f32({n, 2}), i64({1}), i64({2})}),
                     ErrorKind::type_error, "begin i64[1] and end i64[2] differ in length");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_strided_slice(), {f32({n}), i64({2}), i64({2})}),
                     ErrorKind::type_error, "begin i64[2] slices 2 axes but x f32[n] has rank 1");
}

TEST_CASE("take and embedding gather along an axis", "[types]") {
  const Dim n = sym("n");
  CHECK(relate(ops::take(), {f32({30522, 768}), i64({n})}) == "f32[n, 768]");
  CHECK(relate(ops::take(), {f32({4, 5, 6}), i32({n, 2})}, {{"axis", std::int64_t{1}}}) ==
        "f32[4, n, 2, 6]");
  CHECK(relate(ops::take(), {f32({4, 5}), i32({})}, {{"axis", std::int64_t{-1}}}) == "f32[4]");
  CHECK_NIMBLE_ERROR(relate(ops::take(), {f32({4, 5}), f32({3})}), ErrorKind::type_error,
                     "indices must be i32 or i64, got f32[3]");
  CHECK_NIMBLE_ERROR(relate(ops::take(), {f32({4, 5}), i64({3})}, {{"axis", std::int64_t{2}}}),
                     ErrorKind::type_error, "axis 2 is out of range for rank 2");

  CHECK(relate(ops::embedding(), {f32({30522, 768}), i64({2, n})}) == "f32[2, n, 768]");
  CHECK(relate(ops::embedding(), {f16({Any, 64}), i32({})}) == "f16[64]");
  CHECK_NIMBLE_ERROR(relate(ops::embedding(), {f32({768}), i64({n})}), ErrorKind::type_error,
                     "table must have rank 2, got f32[768]");
  CHECK_NIMBLE_ERROR(relate(ops::embedding(), {f32({10, 768}), boolean({n})}),
                     ErrorKind::type_error, "ids must be i32 or i64, got bool[n]");
}

// --- creation and data-dependent shapes ----------------------------------------------------------

TEST_CASE("creation ops take their rank from the shape argument", "[types]") {
  CHECK(relate(ops::zeros(), {i64({3})}, {{"dtype", DType::f32}}) == "f32[?, ?, ?]");
  CHECK(relate(ops::ones(), {i64({0})}, {{"dtype", DType::i32}}) == "i32[]");
  CHECK(relate(ops::full(), {i64({2}), f32({})}, {{"dtype", DType::f16}}) == "f16[?, ?]");
  CHECK_NIMBLE_ERROR(relate(ops::zeros(), {i64({Any})}, {{"dtype", DType::f32}}),
                     ErrorKind::type_error,
                     "shape must be an i64 vector of static length, got i64[?]");
  CHECK_NIMBLE_ERROR(relate(ops::ones(), {i32({2})}, {{"dtype", DType::f32}}),
                     ErrorKind::type_error,
                     "shape must be an i64 vector of static length, got i32[2]");
  CHECK_NIMBLE_ERROR(relate(ops::zeros(), {i64({2})}), ErrorKind::type_error,
                     "zeros: missing attribute 'dtype'");
  CHECK_NIMBLE_ERROR(relate(ops::full(), {i64({2}), f32({1})}, {{"dtype", DType::f32}}),
                     ErrorKind::type_error, "value must be a scalar, got f32[1]");

  CHECK(relate(ops::arange(), {i64({}), i64({}), i64({})}) == "i64[?]");
  CHECK(relate(ops::arange(), {f32({}), f32({}), f32({})}) == "f32[?]");
  CHECK_NIMBLE_ERROR(relate(ops::arange(), {f32({}), i64({}), f32({})}), ErrorKind::type_error,
                     "start is f32 but stop is i64");
  CHECK_NIMBLE_ERROR(relate(ops::arange(), {i64({}), i64({}), i64({1})}), ErrorKind::type_error,
                     "step must be a scalar, got i64[1]");
  CHECK_NIMBLE_ERROR(relate(ops::arange(), {boolean({}), boolean({}), boolean({})}),
                     ErrorKind::type_error, "start must be a numeric tensor, got bool[]");

  CHECK(relate(ops::nonzero(), {f32({sym("n"), 3})}) == "i64[?, 2]");
  CHECK(relate(ops::nonzero(), {boolean({})}) == "i64[?, 0]");
  CHECK(relate(ops::shape_of(), {f32({sym("n"), Any, 3})}) == "i64[3]");
  CHECK(relate(ops::shape_of(), {f32({})}) == "i64[0]");
  CHECK_NIMBLE_ERROR(relate(ops::shape_of(), {ir::tuple_type({f32({})})}), ErrorKind::type_error,
                     "x must be a tensor, got (f32[],)");
}

TEST_CASE("types: device_copy keeps its argument's type and checks the devices it names", "[types]") {
  const ir::Attrs to_gpu{{"src", std::string("cpu")}, {"dst", std::string("cuda:1")}};
  CHECK(relate(ops::device_copy(), {f32({sym("n"), Any, 3})}, to_gpu) == "f32[n, ?, 3]");
  CHECK_NIMBLE_ERROR(relate(ops::device_copy(), {f32({2})}, {{"src", std::string("cpu")}, {"dst", std::string("tpu")}}),
                     ErrorKind::type_error, "dst: expected a device ('cpu', 'cuda' or 'cuda:N'), got 'tpu'");
  CHECK_NIMBLE_ERROR(relate(ops::device_copy(), {f32({2})}, {{"src", std::string("cpu")}}),
                     ErrorKind::type_error, "device_copy: missing attribute 'dst'");
}

// --- collecting loop results
// -----------------------------------------------------------------------

TEST_CASE("stack a List of tensors along a new axis of extent Any", "[types]") {
  const Type list = ir::adt_type("List", {f32({1, 512})});
  CHECK(relate(ops::stack(), {list}) == "f32[?, 1, 512]");
  CHECK(relate(ops::stack(), {list}, {{"axis", std::int64_t{1}}}) == "f32[1, ?, 512]");
  CHECK(relate(ops::stack(), {list}, {{"axis", std::int64_t{-1}}}) == "f32[1, 512, ?]");
  CHECK(relate(ops::stack(), {ir::adt_type("List", {i64({})})}) == "i64[?]");
  CHECK_NIMBLE_ERROR(relate(ops::stack(), {list}, {{"axis", std::int64_t{3}}}),
                     ErrorKind::type_error, "axis 3 is out of range for rank 3");
  CHECK_NIMBLE_ERROR(relate(ops::stack(), {f32({2})}), ErrorKind::type_error,
                     "list must be a List of tensors, got f32[2]");
  CHECK_NIMBLE_ERROR(relate(ops::stack(), {ir::adt_type("Tree", {f32({2})})}),
                     ErrorKind::type_error, "list must be a List of tensors, got Tree<f32[2]>");
  CHECK_NIMBLE_ERROR(
      relate(ops::stack(), {ir::adt_type("List", {ir::adt_type("List", {f32({2})})})}),
      ErrorKind::type_error, "list must be a List of tensors, got List<List<f32[2]>>");
}

TEST_CASE("dynamic_update_slice keeps dest's type", "[types]") {
  const Dim n = sym("n");
  CHECK(relate(ops::dynamic_update_slice(), {f32({n, 512}), f32({1, 512}), i64({})}) ==
        "f32[n, 512]");
  CHECK(relate(ops::dynamic_update_slice(), {f32({10, Any}), f32({n, 4}), i64({})}) ==
        "f32[10, ?]");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_update_slice(), {f32({n, 512}), f32({1, 256}), i64({})}),
                     ErrorKind::type_error, "update has 256 at dim 1 but dest has 512");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_update_slice(), {f32({3, 2}), f32({5, 2}), i64({})}),
                     ErrorKind::type_error, "update has 5 rows but dest has only 3");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_update_slice(), {f32({3, 2}), f32({2}), i64({})}),
                     ErrorKind::type_error, "update has rank 1 but dest has rank 2");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_update_slice(), {f32({3, 2}), f16({1, 2}), i64({})}),
                     ErrorKind::type_error, "dest is f32 but update is f16");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_update_slice(), {f32({3, 2}), f32({1, 2}), i64({1})}),
                     ErrorKind::type_error, "offset must be a scalar, got i64[1]");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_update_slice(), {f32({3, 2}), f32({1, 2}), i32({})}),
                     ErrorKind::type_error, "offset must be i64, got i32[]");
  CHECK_NIMBLE_ERROR(relate(ops::dynamic_update_slice(), {f32({}), f32({}), i64({})}),
                     ErrorKind::type_error, "dest must have rank >= 1, got f32[]");
}
