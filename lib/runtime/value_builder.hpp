// Making a tuple or ADT value without a std::vector of its fields (the VM's
// AllocADT): the fields go straight into the value's pooled array.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nimble/runtime/value.hpp"

namespace nimble::detail {

/// A tuple (`tuple`) or the ADT value of constructor `tag`, whose field i is
/// field(context, i); Error(invalid_argument) if a field is undefined.
[[nodiscard]] Value make_aggregate(bool tuple, std::uint32_t tag, std::size_t n,
                                   Value (*field)(void* context, std::size_t i), void* context);

}  // namespace nimble::detail
