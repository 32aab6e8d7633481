// Rebuilding a value with some of its tensors replaced (moved to another
// device), without recursing on the C++ stack: a list of a million cells or
// a degenerate tree is walked with a work list, like its teardown.
#pragma once

#include <functional>
#include <optional>

#include "nimble/runtime/value.hpp"

namespace nimble::detail {

/// Called for each tensor of a value: its replacement, or nullopt to keep it.
using TensorMap = std::function<std::optional<Tensor>(const Tensor&)>;

/// `value` with each tensor t in it (through tuple and ADT fields) replaced
/// by map(t) where map returns one; nullopt when map replaced none (the
/// caller keeps `value`). Objects are kept. A node reached more than once (a
/// tail shared by two lists, a subtree used twice) is mapped once, and the
/// result shares it as `value` does. Throws what `map` throws.
[[nodiscard]] std::optional<Value> map_tensors(const Value& value, const TensorMap& map);

}  // namespace nimble::detail
