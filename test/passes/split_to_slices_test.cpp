// Golden tests of split_to_slices (passes/golden.hpp: the result must also
// compute what the input computes, on the reference interpreter).
#include <catch2/catch.hpp>

#include "passes/golden.hpp"
#include "passes/passes.hpp"
#include "support/op_calls.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::testing;

TEST_CASE("split_to_slices: the parts read of a split along a static axis become slices, and the split goes",
          "[passes]") {
  // Sections and indices, a negative axis, a part read inside a branch, a
  // part never read.
  check_golden(passes::split_to_slices, R"(
entry def @f(%x: f32[n, 12], %flag: bool[]) -> (f32[n, 4], f32[n, 4], f32[n, 3]) {
  let %s = split(%x, sections=3, axis=1);
  let %a = %s.0;
  let %t = split(%x, indices=[2, 9], axis=-1);
  let %c = if (%flag) {
    let %b = %s.2;
    %b
  } else {
    %a
  };
  let %d = %t.2;
  let %e = tanh(%d);
  (%a, %c, %e)
}
)",
               R"(
entry def @f(%x: f32[n, 12], %flag: bool[]) -> (f32[n, 4], f32[n, 4], f32[n, 3]) {
  let %a = strided_slice(%x, begin=[0], end=[4], axes=[1]);
  let %c = if (%flag) {
    let %b = strided_slice(%x, begin=[8], end=[12], axes=[1]);
    %b
  } else {
    %a
  };
  let %d = strided_slice(%x, begin=[9], end=[12], axes=[1]);
  let %e = tanh(%d);
  (%a, %c, %e)
}
)");
}

TEST_CASE("split_to_slices: a split whose tuple is read whole stays, a split of a dynamic axis is left alone",
          "[passes]") {
  check_golden(passes::split_to_slices, R"(
entry def @f(%x: f32[n, 6], %y: f32[n, 6]) -> ((f32[n, 3], f32[n, 3]), f32[n, 3], f32[?, 6]) {
  let %s = split(%x, sections=2, axis=1);
  let %a = %s.1;
  let %t = split(%y, sections=2, axis=0);
  let %b = %t.0;
  (%s, %a, %b)
}
)",
               R"(
entry def @f(%x: f32[n, 6], %y: f32[n, 6]) -> ((f32[n, 3], f32[n, 3]), f32[n, 3], f32[?, 6]) {
  let %s = split(%x, sections=2, axis=1);
  let %a = strided_slice(%x, begin=[3], end=[6], axes=[1]);
  let %t = split(%y, sections=2, axis=0);
  let %b = %t.0;
  (%s, %a, %b)
}
)");
}

TEST_CASE("split_to_slices: compiled, gates split into slices fuse into their readers and match the interpreter",
          "[passes][jit]") {
  Rng rng(37);
  const Range values{.lo = -2, .hi = 2, .specials = false};
  Builder b;
  b.entry(b.def("f", {{"g", ir::tensor_type({ir::Any, 40}, DType::f32)}, {"c", ir::tensor_type({ir::Any, 10}, DType::f32)}},
                [&](Expr g, Expr c) {
                  auto [i, f, o, u] = split<4>(g, 1);
                  Expr c2 = let("c2", sigmoid(f) * c + sigmoid(i) * tanh(u));
                  return std::array{sigmoid(o) * tanh(c2), c2};
                }));
  const ir::Module m = b.build();
  const vm::Executable exe = compile(m);
  // One kernel for c2 and one for h, each reading the gates where they lie:
  // no split kernel, no tuple.
  const std::string code = exe.disassemble();
  INFO(code);
  CHECK(code.find("split") == std::string::npos);
  CHECK(code.find("AllocADT") == code.rfind("AllocADT"));  // the result's tuple only
  vm::VirtualMachine machine(exe);
  for (const std::int64_t rows : {1, 3, 17}) {
    INFO("rows " << rows);
    const std::vector<Value> args{random_tensor(rng, {rows, 40}, DType::f32, values),
                                  random_tensor(rng, {rows, 10}, DType::f32, values)};
    CHECK(close_value(machine.invoke("f", args), evaluate(m, "f", args), {.rtol = 1e-5, .atol = 1e-6}));
  }
}
