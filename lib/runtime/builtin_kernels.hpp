// Kernels the runtime implements itself, for the opaque ops (no compute rule,
// so no generated code) that an exported model may call: an artifact names
// them by op and attributes, and the runtime needs no compiler to run them.
// The reference kernels of the same ops call these functions, so both agree.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "nimble/runtime/kernel.hpp"

namespace nimble::runtime {

/// The shape of stack(list, axis): the element shape with the list's length
/// inserted at `axis` (negative: from the end of the result's dims). Throws
/// Error for a value that is not a List of tensors of one dtype and shape,
/// and for an empty list (its element shape is unknown).
[[nodiscard]] Shape stacked_shape(const Value& list, std::int64_t axis);
/// The elements of `list` stacked along a new dim `axis`.
[[nodiscard]] Tensor stack_list(const Value& list, std::int64_t axis);

/// The built-in kernel of op `op` (`kind`: its results, or their shapes)
/// with integer attributes `attrs` in the op's order, or null if the
/// runtime has none.
[[nodiscard]] Ref<Kernel> make_builtin_kernel(std::string_view op, PrimitiveKind kind,
                                              std::span<const std::int64_t> attrs);

}  // namespace nimble::runtime
