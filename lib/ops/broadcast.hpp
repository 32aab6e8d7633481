// Numpy broadcasting of tensor types whose dims may be `Any` or symbols.
//
// Shapes align at their trailing dims; the shorter one is extended with 1s.
// Per pair of dims a, b:
//   the same dim (constant, symbol or Any)  -> that dim
//   1 vs X, X vs 1                          -> X
//   two different constants, neither 1      -> type error
//   Any or a symbol vs a constant n != 1    -> n (the run time checks it)
//   Any vs a symbol, two different symbols  -> Any (either may be 1)
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "ops/relation_util.hpp"

namespace nimble::ops {

/// The broadcast of two dims, or nullopt when they are different constants
/// and neither is 1.
[[nodiscard]] std::optional<Dim> broadcast_dim(const Dim& a, const Dim& b);

/// One input of a broadcast, named as its op names it.
struct BroadcastOperand {
  std::string_view name;
  const TensorTypeNode* type;
};

/// The broadcast shape of all `operands`; throws Error(type_error) naming the
/// two that conflict, with the dim numbered in the result:
/// "a f32[2, 3] and b f32[4, 3] do not broadcast: dim 0 is 2 vs 4".
[[nodiscard]] Shape broadcast_shapes(std::span<const BroadcastOperand> operands);

}  // namespace nimble::ops
