// Golden tests of fuse_ops (passes/golden.hpp), the verifier's rules for
// primitive functions, and the compile report. Differential tests on whole
// models and on random programs are in [vm] and [models].
#include <catch2/catch.hpp>

#include <string>

#include "nimble/nimble.hpp"
#include "passes/golden.hpp"
#include "passes/passes.hpp"

using namespace nimble;
using nimble::testing::check_golden;


TEST_CASE("fuse_ops: an elementwise chain becomes one primitive function, its scalar constant inside", "[passes]") {
  check_golden(passes::fuse_ops, R"(
entry def @f(%x: f32[n, 4], %b: f32[4]) -> f32[n, 4] {
  let %a = mul(%x, 2f32);
  let %c = add(%a, %b);
  let %d = tanh(%c);
  %d
}
)",
               R"(
entry def @f(%x: f32[n, 4], %b: f32[4]) -> f32[n, 4] {
  let %d = (primitive fn (%p0: f32[n, 4], %p1: f32[4]) {
    let %a = mul(%p0, 2f32);
    let %c = add(%a, %p1);
    let %d_1 = tanh(%c);
    %d_1
  })(%x, %b);
  %d
}
)");
}

TEST_CASE("fuse_ops: dense takes its epilogue but not its producer", "[passes]") {
  check_golden(passes::fuse_ops, R"(
entry def @f(%x: f32[n, 8], %w: f32[16, 8], %b: f32[16], %r: f32[n, 16]) -> f32[n, 16] {
  let %t = tanh(%x);
  let %y = dense(%t, %w, %b);
  let %g = gelu(%y);
  let %s = add(%g, %r);
  %s
}
)",
               R"(
entry def @f(%x: f32[n, 8], %w: f32[16, 8], %b: f32[16], %r: f32[n, 16]) -> f32[n, 16] {
  let %t = tanh(%x);
  let %s = (primitive fn (%p0: f32[n, 8], %p1: f32[16, 8], %p2: f32[16], %p3: f32[n, 16]) {
    let %y = dense(%p0, %p1, %p2);
    let %g = gelu(%y);
    let %s_1 = add(%g, %p3);
    %s_1
  })(%t, %w, %b, %r);
  %s
}
)");
}

TEST_CASE("fuse_ops: a concatenation takes the producers of its parts, and joins its consumer", "[passes]") {
  // A level of the Tree-LSTM: rows gathered from [leaves; level below] and
  // joined side by side, one kernel; the tuple only the concatenation reads
  // is written in place in it. A tuple read elsewhere too stays as it is.
  check_golden(passes::fuse_ops, R"(
entry def @f(%a: f32[n, 4], %b: f32[r, 4], %i: i64[m]) -> (f32[m, 8], (f32[n, 4], f32[r, 4])) {
  let %t = (%a, %b);
  let %table = concatenate(%t, axis=0);
  let %x = take(%table, %i, axis=0);
  let %y = tanh(%table);
  let %s = sigmoid(%x);
  let %u = (%s, %x);
  let %z = concatenate(%u, axis=1);
  let %w = (%a, %b);
  let %v = concatenate(%w, axis=0);
  (%z, %w)
}
)",
               R"(
entry def @f(%a: f32[n, 4], %b: f32[r, 4], %i: i64[m]) -> (f32[m, 8], (f32[n, 4], f32[r, 4])) {
  let %t = (%a, %b);
  let %table = concatenate(%t, axis=0);
  let %y = tanh(%table);
  let %z = (primitive fn (%p0: f32[?, 4], %p1: i64[m]) {
    let %x = take(%p0, %p1, axis=0);
    let %s = sigmoid(%x);
    let %z_1 = concatenate((%s, %x), axis=1);
    %z_1
  })(%table, %i);
  let %w = (%a, %b);
  let %v = concatenate(%w, axis=0);
  (%z, %w)
}
)");
}

TEST_CASE("fuse_ops: a reduction takes its injective producers, and after a dense its residual add", "[passes]") {
  check_golden(passes::fuse_ops, R"(
entry def @f(%x: f32[n, 8], %w: f32[8, 8], %gamma: f32[8], %beta: f32[8]) -> (f32[n, 8], f32[n, 8]) {
  let %y = dense(%x, %w, %gamma);
  let %r = add(%x, %y);
  let %ln = layer_norm(%r, %gamma, %beta, epsilon=1e-5);
  let %m = mul(%x, 0.125f32);
  let %s = softmax(%m, axis=-1);
  let %e = exp(%s);
  (%ln, %e)
}
)",
               R"(
entry def @f(%x: f32[n, 8], %w: f32[8, 8], %gamma: f32[8], %beta: f32[8]) -> (f32[n, 8], f32[n, 8]) {
  let %ln = (primitive fn (%p0: f32[n, 8], %p1: f32[8, 8], %p2: f32[8], %p3: f32[8]) {
    let %y = dense(%p0, %p1, %p2);
    let %r = add(%p0, %y);
    let %ln_1 = layer_norm(%r, %p2, %p3, epsilon=1e-05);
    %ln_1
  })(%x, %w, %gamma, %beta);
  let %e = (primitive fn (%p0_1: f32[n, 8]) {
    let %m = mul(%p0_1, 0.125f32);
    let %s = softmax(%m, axis=-1);
    let %e_1 = exp(%s);
    %e_1
  })(%x);
  (%ln, %e)
}
)");
}

TEST_CASE("fuse_ops: nothing to do: shared values, integer scalars, data-dependent shapes, lone views, branches", "[passes]") {
  check_golden(passes::fuse_ops, testing::kNothingToDo, testing::kNothingToDo);
}

TEST_CASE("fuse_ops: the verifier holds primitive functions to their form", "[passes]") {
  auto problem = [](const char* text) {
    try {
      ir::verify(ir::parse(text, "bad.nir"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // It captures nothing: only its parameters are in scope.
  CHECK_THAT(problem(R"(
def @f(%x: f32[4]) {
  let %y = (primitive fn (%p: f32[4]) {
    let %a = add(%p, %x);
    %a
  })(%x);
  %y
})"),
             Catch::Contains("%x is used where it is not bound"));
  // Its body is op calls on variables and constants.
  CHECK_THAT(problem(R"(
def @f(%x: f32[4]) {
  let %y = (primitive fn (%p: f32[4]) {
    let %a = (%p, %p);
    %p
  })(%x);
  %y
})"),
             Catch::Contains("a primitive function computes only calls of fusable ops"));
  CHECK_THAT(problem(R"(
def @f(%x: f32[4]) {
  let %y = (primitive fn (%p: f32[4]) {
    let %a = add(%p, exp(%p));
    %a
  })(%x);
  %y
})"),
             Catch::Contains("op arguments are variables, constants or tuples of them"));
}

TEST_CASE("compile report: kernels before and after fusion, allocations, the planned arena", "[passes]") {
  const ir::Module m = ir::parse(R"(
entry def @f(%x: f32[n, 8], %w: f32[8, 8], %gamma: f32[8], %beta: f32[8]) -> (f32[n, 8], f32[n, 8]) {
  let %y = dense(%x, %w, %gamma);
  let %r = add(%x, %y);
  let %ln = layer_norm(%r, %gamma, %beta, epsilon=1e-5);
  let %m = mul(%x, 0.125f32);
  let %s = softmax(%m, axis=-1);
  let %e = exp(%s);
  (%ln, %e)
}

entry def @g(%x: f32[16]) -> f32[16] {
  let %a = exp(%x);
  let %b = tanh(%a);
  let %c = add(%a, %b);
  let %d = mul(%c, %x);
  %d
})",
                                 "report.nir");
  ir::infer_types(m);
  CompileReport report;
  const vm::Executable exe = compile(m, {.report = &report});
  REQUIRE(report.functions.size() == 2);
  const CompileReport::Function& f = report.functions[0];
  CHECK(f.name == "f");
  CHECK(f.kernels_unfused == 6);
  CHECK(f.kernels == 2);
  // The outputs' shapes come from %x's dims: no shape function runs.
  CHECK(f.shape_functions == 0);
  CHECK(f.dynamic_allocations == 2);
  REQUIRE(f.fused.size() == 2);
  CHECK(f.fused[0].ops == std::vector<std::string>{"dense", "add", "layer_norm"});
  CHECK(f.fused[1].ops == std::vector<std::string>{"mul", "softmax", "exp"});
  // @g: a → b → c → d stays one kernel; unfused, a, b and c share an arena.
  CHECK(report.functions[1].kernels_unfused == 4);
  CHECK(report.functions[1].kernels == 1);
  CompileReport unfused;
  const vm::Executable plain = compile(m, {.fuse_ops = false, .report = &unfused});
  const CompileReport::Function& g = unfused.functions[1];
  CHECK(g.kernels == 4);
  CHECK(g.fused.empty());
  // a and b are in use at c's kernel, with c itself: 3 × 64 bytes; the arena
  // and the result's own storage are the static allocations.
  CHECK(g.planned_lower_bound_bytes == 3 * 64);
  CHECK(g.planned_peak_bytes >= g.planned_lower_bound_bytes);
  CHECK(g.static_allocations == 2);
  CHECK(g.static_bytes == g.planned_peak_bytes + 64);
  CHECK_THAT(report.dot, Catch::StartsWith("digraph nimble {") && Catch::Contains("dense\\nadd\\nlayer_norm"));
  CHECK_THAT(report.table(), Catch::Contains("| f | 6 | 2 | 0 | 0 | 0 | 2 | 0 | 0 |"));
}
