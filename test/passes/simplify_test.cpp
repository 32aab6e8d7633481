// Golden tests of simplify (passes/golden.hpp). The optimized pipeline is
// held to the interpreter on random programs in [vm] and on the models.
#include <catch2/catch.hpp>

#include "passes/golden.hpp"
#include "passes/passes.hpp"

using namespace nimble;
using nimble::testing::check_golden;

TEST_CASE("simplify: constants fold through the reference kernels; a call that raises stays", "[passes]") {
  check_golden(passes::simplify, R"(
entry def @f(%x: f32[2], %k: i64[]) -> (f32[2], i64[], i64[]) {
  let %a = const f32[2] [1, 2];
  let %b = add(%a, %a);
  let %c = mul(%x, %b);
  let %i = add(2i64, 3i64);
  let %j = mul(%i, %k);
  let %e = div(%i, 0i64);
  (%c, %j, %e)
}
)",
               R"(
entry def @f(%x: f32[2], %k: i64[]) -> (f32[2], i64[], i64[]) {
  let %c = mul(%x, const f32[2] [2, 4]);
  let %j = mul(5i64, %k);
  let %e = div(5i64, 0i64);
  (%c, %j, %e)
}
)");
}

TEST_CASE("simplify: common subexpressions: equal calls reuse the first, an outer one reaches into branches", "[passes]") {
  check_golden(passes::simplify, R"(
entry def @f(%x: f32[n, 4], %flag: bool[]) -> (f32[n, 4], f32[n, 4], f32[n, 1]) {
  let %a = exp(%x);
  let %b = exp(%x);
  let %c = add(%a, %b);
  let %s = sum(%x, axes=[1], keepdims=true);
  let %t = sum(%x, axes=[0], keepdims=true);
  let %d = if (%flag) {
    let %e = exp(%x);
    let %g = tanh(%e);
    %g
  } else {
    let %h = tanh(%a);
    %h
  };
  let %m = sum(%x, axes=[1], keepdims=true);
  let %u = add(%m, %s);
  (%c, %d, %u)
}
)",
               R"(
entry def @f(%x: f32[n, 4], %flag: bool[]) -> (f32[n, 4], f32[n, 4], f32[n, 1]) {
  let %a = exp(%x);
  let %c = add(%a, %a);
  let %s = sum(%x, axes=[1], keepdims=true);
  let %d = if (%flag) {
    let %g = tanh(%a);
    %g
  } else {
    let %h = tanh(%a);
    %h
  };
  let %u = add(%s, %s);
  (%c, %d, %u)
}
)");
}

TEST_CASE("simplify: exact identities only: x * 1, x - 0, x / 1, neg(neg(x)), same-type cast and reshape", "[passes]") {
  check_golden(passes::simplify, R"(
entry def @f(%x: f32[n, 4], %y: f32[?]) -> (f32[n, 4], f32[n, 4], f32[n, 4], f32[n, 4], f32[n, 4], f32[?], f32[?]) {
  let %a = mul(%x, 1f32);
  let %b = sub(%a, 0f32);
  let %c = neg(%b);
  let %d = neg(%c);
  let %e = cast(%d, dtype=f32);
  let %f = add(%e, 0f32);
  let %g = div(%f, 1f32);
  let %r = reshape(%x, newshape=[0, 4]);
  let %q = reshape(%y, newshape=[-1]);
  let %z = mul(%y, const f32[1] [1]);
  (%g, %f, %e, %c, %r, %q, %z)
}
)",
               R"(
entry def @f(%x: f32[n, 4], %y: f32[?]) -> (f32[n, 4], f32[n, 4], f32[n, 4], f32[n, 4], f32[n, 4], f32[?], f32[?]) {
  let %c = neg(%x);
  let %f = add(%x, 0f32);
  let %q = reshape(%y, newshape=[-1]);
  let %z = mul(%y, const f32[1] [1]);
  (%f, %f, %x, %c, %x, %q, %z)
}
)");
}

TEST_CASE("simplify: dead pure lets go, calls of functions stay", "[passes]") {
  check_golden(passes::simplify, R"(
entry def @f(%x: f32[4]) -> f32[4] {
  let %a = exp(%x);
  let %b = tanh(%a);
  let %t = (%a, %b);
  let %u = %t.0;
  let %loop = @g(%x);
  %x
}

def @g(%x: f32[4]) -> f32[4] {
  %x
}
)",
               R"(
entry def @f(%x: f32[4]) -> f32[4] {
  let %loop = @g(%x);
  %x
}

def @g(%x: f32[4]) -> f32[4] {
  %x
}
)");
}

TEST_CASE("simplify: nothing to do", "[passes]") {
  check_golden(passes::simplify, testing::kNothingToDo, testing::kNothingToDo);
}
