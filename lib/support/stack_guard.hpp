// check_stack: the bound on nimble's recursive walks.
//
// A walk over user-controlled structure (an expression's operands, a type's
// fields, a value's children) either loops with an explicit stack or
// recurses and calls check_stack() on each level. check_stack throws
// Error(resource_exhausted) naming the walk when less than a reserve of this
// thread's C++ stack remains (a quarter of the stack, at most 1 MiB), so a
// hostile depth ends in an Error instead of a stack overflow, and the depth
// admitted scales with the stack the host gives its threads. docs/limits.md
// lists which walk does which.
#pragma once

#include <cstdint>

namespace nimble {

namespace detail {
/// The lowest frame address at which this thread may still recurse
/// (UINTPTR_MAX until the thread's first check sets it).
extern thread_local constinit std::uintptr_t stack_floor;
/// Below the floor: throws, unless `frame` is not on this thread's stack at
/// all (a fiber's stack the host made: not nimble's to bound).
void stack_below_floor(std::uintptr_t frame, const char* walk);
}  // namespace detail

/// Throws Error(resource_exhausted) "<walk>: nesting too deep" when this
/// thread's stack is nearly used up. Costs a compare on the fast path.
inline void check_stack(const char* walk) {
  const auto frame = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  if (frame < detail::stack_floor) [[unlikely]]
    detail::stack_below_floor(frame, walk);
}

}  // namespace nimble
