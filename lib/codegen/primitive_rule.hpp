// A primitive function (its IR text, as the VM's primitive table holds it)
// as one compute rule: placeholders for its tensor parameters and the
// te::Tensors of its results. Shared by every code generator.
#pragma once

#include <optional>
#include <vector>

#include "nimble/runtime/kernel.hpp"
#include "ops/compute.hpp"

namespace nimble::codegen {

struct PrimitiveRule {
  /// One placeholder per tensor the kernel receives: the parameters in order,
  /// a tuple parameter contributing one per field (depth first).
  std::vector<te::Tensor> inputs;
  /// One per result tensor (a tuple result: one per field).
  std::vector<te::Tensor> outputs;
  /// Per parameter: whether it is a tuple (the kernel then takes Values).
  bool has_tuple_input = false;
};

/// The rule of `prim`, a compute primitive whose body is op calls on its
/// parameters (lets, tuples and tuple fields between them); nullopt if some
/// op has no compute rule (an opaque op: another provider serves it).
/// Placeholders are named as the op names its arguments where a parameter
/// feeds an op directly (so messages read as the reference kernel's), else
/// p0, p1, ... Throws Error(parse_error) for a malformed source.
[[nodiscard]] std::optional<PrimitiveRule> primitive_rule(const PrimitiveInfo& prim);

}  // namespace nimble::codegen
