// Golden tests of pretranspose_weights (passes/golden.hpp: the result must
// also compute what the input computes, on the reference interpreter).
#include <catch2/catch.hpp>

#include "passes/golden.hpp"
#include "passes/passes.hpp"
#include "support/op_calls.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::testing;

TEST_CASE("pretranspose_weights: a dense with a constant weight becomes a matmul with it transposed, plus the bias",
          "[passes]") {
  check_golden(passes::pretranspose_weights, R"(
entry def @f(%x: f32[n, 3], %b: f32[2]) -> f32[n, 2] {
  let %y = dense(%x, const f32[2, 3] [1, 2, 3, 4, 5, 6], %b);
  %y
}
)",
               R"(
entry def @f(%x: f32[n, 3], %b: f32[2]) -> f32[n, 2] {
  let %y_product = matmul(%x, const f32[3, 2] [1, 4, 2, 5, 3, 6], transpose_a=false, transpose_b=false);
  let %y = add(%y_product, %b);
  %y
}
)",
               Tolerance{.rtol = 1e-6, .atol = 1e-6});  // matmul sums in another order than dense
}

TEST_CASE("pretranspose_weights: a single row, a weight known only at run time, other ranks stay dense",
          "[passes]") {
  const char* unchanged = R"(
entry def @f(%h: f32[1, 3], %x: f32[n, 3], %w: f32[2, 3], %v: f32[3], %b: f32[2]) -> (f32[1, 2], f32[n, 2], f32[2]) {
  let %step = dense(%h, const f32[2, 3] [1, 2, 3, 4, 5, 6], %b);
  let %run = dense(%x, %w, %b);
  let %vec = dense(%v, const f32[2, 3] [1, 2, 3, 4, 5, 6], %b);
  (%step, %run, %vec)
}
)";
  check_golden(passes::pretranspose_weights, unchanged, unchanged);
}

TEST_CASE("pretranspose_weights: compiled, a dense with a constant weight matches the interpreter on any rows",
          "[passes][jit]") {
  Rng rng(31);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  const Tensor w = random_tensor(rng, {37, 70}, DType::f32, values);
  const Tensor bias = random_tensor(rng, {37}, DType::f32, values);
  Builder b;
  b.entry(b.def("f", {{"x", ir::tensor_type({ir::Any, 70}, DType::f32)}},
                [&](Expr x) { return tanh(dense(x, constant(w), constant(bias))); }));
  const ir::Module m = b.build();
  vm::VirtualMachine machine(compile(m));
  for (const std::int64_t rows : {0, 1, 5, 6, 13, 40, 100}) {
    INFO("rows " << rows);
    const Tensor x = random_tensor(rng, {rows, 70}, DType::f32, values);
    const Value expected = evaluate(m, "f", {x});
    CHECK_THAT(machine.invoke("f", {x}).tensor(), IsCloseTo(expected.tensor(), {.rtol = 1e-5, .atol = 1e-5}));
  }
}
