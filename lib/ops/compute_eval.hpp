// A naive evaluator of compute rules (compute.hpp): the oracle the rules are
// tested against (each op's rule must agree with its reference kernel), and
// the constant folder's way to run an op on constants. Clear, not fast: one
// tree walk per element.
#pragma once

#include <span>
#include <vector>

#include "nimble/runtime/tensor.hpp"
#include "ops/compute.hpp"

namespace nimble::te {

/// Computes `outputs` with `inputs[i]` bound to `placeholders[i]` (the same
/// count; every placeholder the outputs read must be among them).
///
/// First the placeholders' shape Vars are bound from the inputs' shapes (a
/// Var shared by several dims must get one value); then every stage the
/// outputs need is computed once, producers first: its checks, its shape,
/// then every element, stored (and so rounded) in the stage's dtype. Float
/// expressions compute in double and integers wrap to their dtype, as
/// compute.hpp states. The results are fresh tensors, one per output; the
/// inputs are not modified.
///
/// Fails with nimble::Error: type_error for an input of another dtype than
/// its placeholder; invalid_argument for an input of another rank, or whose
/// shape conflicts with the placeholder's (a constant dim, a Var bound by
/// another dim); a failed Check with its kind; runtime_error for a checked
/// condition on an element (an out-of-range checked load, integer division
/// by zero or overflow, a negative integer exponent), naming the stage and
/// the element. Thread-safe: no shared state.
[[nodiscard]] std::vector<nimble::Tensor> evaluate(std::span<const Tensor> outputs,
                                                   std::span<const Tensor> placeholders,
                                                   std::span<const nimble::Tensor> inputs);

}  // namespace nimble::te
