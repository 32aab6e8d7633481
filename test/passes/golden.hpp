// The golden-test helper of the passes' tests: input IR text -> the printed
// result of a pass, which must also verify, print back to itself after
// parsing, type-check, and compute what the input computes (the reference
// interpreter on both, on seeded inputs).
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "nimble/nimble.hpp"
#include "support/same_value.hpp"

namespace nimble::testing {


// Inputs of the test programs: every parameter f32[n, c] with n = 3, or
// as its type says; seeded values in [-1, 1).
inline Value input_for(const ir::Type& t, std::uint64_t& state) {
  const auto* tensor = t.as<ir::TensorTypeNode>();
  REQUIRE(tensor != nullptr);
  std::vector<std::int64_t> dims;
  for (const ir::Dim& d : tensor->shape) dims.push_back(d.is_fixed() ? d.value() : 3);
  Tensor x = Tensor::zeros(Shape(std::span<const std::int64_t>(dims)), tensor->dtype);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53);
    switch (tensor->dtype) {
      case DType::f32: x.data<float>()[i] = static_cast<float>(2 * u - 1); break;
      case DType::i64: x.data<std::int64_t>()[i] = 4; break;
      case DType::boolean: x.data<bool>()[i] = u < 0.5; break;
      default: FAIL("no input of " << to_string(tensor->dtype));
    }
  }
  return x;
}

/// A program neither simplify nor fuse_ops changes: a value read twice and
/// in a branch, integer scalar work, a data-dependent shape, a lone view, an
/// op inside a branch on an outer value.
inline constexpr const char* kNothingToDo = R"(
entry def @f(%x: f32[n, 4], %k: i64[], %flag: bool[]) -> (f32[n, 4], f32[?], f32[?]) {
  let %a = exp(%x);
  let %b = add(%a, %a);
  let %j = add(%k, 1i64);
  let %z = arange(0i64, %j, 1i64);
  let %u = cast(%z, dtype=f32);
  let %r = reshape(%b, newshape=[-1]);
  let %c = if (%flag) {
    let %t = tanh(%b);
    %t
  } else {
    %a
  };
  (%c, %r, %u)
}
)";

/// An entry (@main) that calls another entry (@g) returning a tuple, whose
/// tensor field a kernel reads.
inline constexpr const char* kEntryCallsEntry = R"(
entry def @main(%x: f32[2]) -> f32[2] {
  let %p = @g(%x);
  let %a = %p.0;
  let %e = exp(%a);
  %e
}

entry def @g(%x: f32[2]) -> (f32[2], i64[]) {
  let %t = tanh(%x);
  (%t, 3i64)
}
)";

/// A program for device placement: kernels, a condition a kernel computes,
/// scalar work, a call, a shape read, a tuple result.
inline constexpr const char* kPlacementProgram = R"(
entry def @f(%x: f32[n, 4], %w: f32[4, 4], %k: i64[]) -> (f32[n, 4], i64[2], i64[]) {
  let %a = exp(%x);
  let %b = add(%a, %x);
  let %s = sum(%b);
  let %c = greater(%s, 0f32);
  let %j = add(%k, 1i64);
  let %r = if (%c) {
    let %l = @layer(%b, %w);
    %l
  } else {
    %a
  };
  let %d = shape_of(%b);
  (%r, %d, %j)
}

def @layer(%h: f32[n, 4], %w: f32[4, 4]) -> f32[n, 4] {
  let %y = matmul(%h, %w);
  let %t = tanh(%y);
  %t
}
)";

/// `pass` on `input` prints as `expected` (both start with a newline, which
/// is dropped); the first function must be an entry. The results must be
/// bit for bit the same, or with `tolerance`, close (a pass that reorders a
/// sum).
template <class Pass>
void check_golden(Pass&& pass, const std::string& input, const std::string& expected,
                  std::optional<Tolerance> tolerance = std::nullopt) {
  ir::Module m = ir::parse(input, "input.nir");
  ir::verify(m);
  ir::infer_types(m);
  const ir::Module fused = pass(m);
  const std::string printed = ir::print(fused);
  CHECK(printed == expected.substr(1));
  ir::verify(fused);
  const ir::Module reparsed = ir::parse(printed, "fused.nir");
  CHECK(ir::print(reparsed) == printed);
  ir::verify(reparsed);
  ir::infer_types(reparsed);

  const std::string name = m.functions()[0].first;
  REQUIRE(m.is_entry(name));
  const auto* fn = m.functions()[0].second.as<ir::FunctionNode>();
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    std::uint64_t state = seed;
    std::vector<Value> args;
    for (const ir::Expr& p : fn->params) args.push_back(input_for(p.as<ir::VarNode>()->type_annotation, state));
    std::optional<Value> before, after;
    std::optional<ErrorKind> raised_before, raised_after;
    try {
      before = evaluate(m, name, args);
    } catch (const Error& e) {
      raised_before = e.kind();
    }
    try {
      after = evaluate(fused, name, args);
    } catch (const Error& e) {
      raised_after = e.kind();
    }
    CHECK(raised_after == raised_before);
    if (before && after) CHECK((tolerance ? close_value(*after, *before, *tolerance) : same_value(*after, *before)));
  }
}


}  // namespace nimble::testing
