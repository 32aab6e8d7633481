// Shape functions: the shapes of an op call's outputs at run time, computed
// on the CPU before the kernel runs, so that the VM can allocate the outputs
// (manifest memory) and check the call.
#pragma once

#include <span>
#include <vector>

#include "ir/op.hpp"

namespace nimble::ops {

/// Whether `op`'s output shape depends on its input VALUES, not only on its
/// input shapes: arange, nonzero, zeros / ones / full (the shape is an input
/// tensor), dynamic_strided_slice (run-time bounds) and stack (a list's length).
[[nodiscard]] bool has_data_dependent_shape(const ir::OpDef& op) noexcept;

/// The shapes of the tensors `op` produces for `args` (one per tensor; a
/// tuple result gives one per field, in order).
///
/// Data-independent ops use only the shapes and dtypes of the arguments: the
/// op's type relation evaluated on the concrete shapes, so that shapes and
/// types can never disagree. A mismatch that only the run-time shapes reveal
/// (a dim that does not broadcast) is Error(invalid_argument) naming the op.
/// Data-dependent ops read the argument values; their shape function runs
/// the op's reference kernel (they are cheap creation and indexing ops, or,
/// like nonzero, need the scan anyway).
[[nodiscard]] std::vector<Shape> output_shapes(const ir::OpDef& op, std::span<const Value> args,
                                               const ir::Attrs& attrs);

}  // namespace nimble::ops
