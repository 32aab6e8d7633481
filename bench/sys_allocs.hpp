// Counts the system allocations of a stretch of code: every malloc, calloc,
// realloc and aligned allocation by any thread of the process (operator new
// included: libstdc++'s calls malloc) while counting is on. The bench
// binaries define malloc & co. here (sys_allocs.cpp), forwarding to glibc's
// own, so that the count covers the runtime's tensors, Values, ADT nodes,
// closures, frames and results alike, not just its pooled allocator.
#pragma once

#include <cstdint>

namespace nimble::bench {

/// Starts counting from zero.
void start_counting_sys_allocs() noexcept;
/// Stops counting; returns the allocations since the start.
std::uint64_t stop_counting_sys_allocs() noexcept;

}  // namespace nimble::bench
