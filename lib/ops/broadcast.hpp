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

#include "ops/compute.hpp"
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

// --- compute rules: the same broadcasting on run-time extents -----------------------
// An extent that is not a constant may be 1 at run time, so the result extent
// and the input indices select on it; where the constants decide, the
// selects and checks fold away.

/// The broadcast of two extents, and the condition that they broadcast at
/// run time (folded to true where the constants show it).
struct BroadcastExtent {
  te::Expr extent;
  te::Expr ok;
};
/// Throws Error(type_error) for two different constants, neither 1 (the
/// type relation rejects such calls first).
[[nodiscard]] BroadcastExtent broadcast_extent(const te::Expr& a, const te::Expr& b);

/// The broadcast shape of te tensors, with one Check per dim that the run
/// time must verify ("a and b do not broadcast at dim 0").
struct TeBroadcast {
  std::vector<te::Expr> shape;
  std::vector<te::Check> checks;
};
[[nodiscard]] TeBroadcast broadcast_shapes(std::span<const te::Tensor> inputs,
                                           std::span<const std::string_view> names);

/// The index along a dim of extent `extent` that broadcasts to index `i` of
/// a result dim of extent `out`: 0 where `extent` is 1.
[[nodiscard]] te::Expr broadcast_index(const te::Expr& extent, const te::Expr& out,
                                       const te::Expr& i);

/// The element of `input` that broadcasts to `index` of a result of `shape`
/// (trailing dims aligned).
[[nodiscard]] te::Expr load_broadcast(const te::Tensor& input, std::span<const te::Var> index,
                                      std::span<const te::Expr> shape);

}  // namespace nimble::ops
