// The reference interpreter: control flow, recursion, closures, ADTs, and
// the checks of entry arguments.
#include "nimble/interpreter.hpp"

#include <catch2/catch.hpp>

#include "nimble/builder.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::IsCloseTo;

namespace {
Tensor i64s(std::int64_t v) { return Tensor::scalar<std::int64_t>(v); }
std::int64_t as_int(const Value& v) { return v.tensor().at<std::int64_t>({}); }
}  // namespace

TEST_CASE("recursion 10,000 calls deep, and a loop of 100,000 steps", "[eval]") {
  Builder b;
  // depth(n) = n == 0 ? 0 : depth(n - 1) + 1: not a tail call.
  Function depth = b.declare("depth", {{"n", i64({})}}, i64({}));
  b.define(depth, [&](Expr n) {
    return if_(equal(n, scalar(0, DType::i64)), [&] { return scalar(0, DType::i64); },
               [&] { return depth(n - 1.0) + 1.0; });
  });
  b.entry(depth);
  // A counted loop (tail recursion) summing 0..n-1.
  b.entry(b.def("sum_to", {{"n", i64({})}}, [&](Expr n) {
    auto [total] = foreach_(n, std::array<Expr, 1>{scalar(0, DType::i64)},
                            [&](Expr i, std::array<Expr, 1> s) { return std::array{s[0] + i}; });
    return total;
  }));
  const ir::Module m = b.build();
  CHECK(as_int(evaluate(m, "depth", {i64s(10'000)})) == 10'000);
  CHECK(as_int(evaluate(m, "sum_to", {i64s(100'000)})) == 4'999'950'000);
}

TEST_CASE("closures, tuples, lists and match", "[eval]") {
  Builder b;
  Adt list = b.list();
  const Type vec = f32({2});
  Function total = b.declare("total", {{"xs", list.type({vec})}}, vec);
  b.define(total, [&](Expr xs) -> Expr {
    return Match(xs)
        .case_(list["Nil"], [&] { return constant(Tensor::zeros({2}, DType::f32)); })
        .case_(list["Cons"], [&](Expr h, Expr t) { return h + total(t); });
  });
  b.entry(b.def("main", {{"x", vec}, {"xs", list.type({vec})}}, [&](Expr x, Expr xs) {
    Closure scale = closure({{"y", vec}}, vec, [&](Expr y) { return y * x; });
    return tuple({scale(total(xs)), total(list["Cons"]({x, xs}))});
  }));
  const ir::Module m = b.build();
  const Tensor x = Tensor::from_data<float>({2}, {2, 3});
  const Value xs = list["Cons"].value(
      {Tensor::from_data<float>({2}, {1, 1}),
       list["Cons"].value({Tensor::from_data<float>({2}, {10, 20}), list["Nil"].value()})});
  const Value out = evaluate(m, "main", {x, xs});
  CHECK_THAT(out[0].tensor(), IsCloseTo(Tensor::from_data<float>({2}, {22, 63})));
  CHECK_THAT(out[1].tensor(), IsCloseTo(Tensor::from_data<float>({2}, {13, 24})));
}

TEST_CASE("entry arguments are checked against the declared types", "[eval]") {
  Builder b;
  const Dim n{"n", 4};
  b.entry(b.def("f", {{"a", f32({n, 3})}, {"b", f32({n, Any})}},
                [](Expr a, Expr b2) { return tuple({a, b2}); }));
  const ir::Module m = b.build();
  const Tensor ok = Tensor::zeros({2, 3}, DType::f32);
  CHECK_NOTHROW(evaluate(m, "f", {ok, Tensor::zeros({2, 7}, DType::f32)}));
  CHECK_NIMBLE_ERROR(evaluate(m, "f", {ok}), ErrorKind::type_error,
                     "@f: expected 2 arguments, got 1");
  CHECK_NIMBLE_ERROR(evaluate(m, "f", {Tensor::zeros({2, 4}, DType::f32), ok}),
                     ErrorKind::type_error,
                     "@f: argument 1 (%a) must be f32[n<=4, 3], got f32[2, 4]");
  CHECK_NIMBLE_ERROR(evaluate(m, "f", {Tensor::zeros({2, 3}, DType::i32), ok}),
                     ErrorKind::type_error,
                     "@f: argument 1 (%a) must be f32[n<=4, 3], got i32[2, 3]");
  CHECK_NIMBLE_ERROR(evaluate(m, "f", {ok, Tensor::zeros({3, 3}, DType::f32)}),
                     ErrorKind::type_error,
                     "@f: argument 2 (%b) must be f32[n<=4, ?], got f32[3, 3] (n is 2 in an "
                     "earlier argument)");
  CHECK_NIMBLE_ERROR(evaluate(m, "f", {Tensor::zeros({5, 3}, DType::f32), ok}),
                     ErrorKind::type_error,
                     "@f: argument 1 (%a) must be f32[n<=4, 3], got f32[5, 3] (5 exceeds the "
                     "bound of n)");
  CHECK_NIMBLE_ERROR(evaluate(m, "f", {Value::tuple({}), ok}), ErrorKind::type_error,
                     "@f: argument 1 (%a) must be f32[n<=4, 3], got a tuple of 0 fields");
  CHECK_NIMBLE_ERROR(evaluate(m, "g", {}), ErrorKind::invalid_argument,
                     "evaluate: the module has no function @g");
}
