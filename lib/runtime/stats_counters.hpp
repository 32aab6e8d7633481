// Internal: how the VM and the JIT count their work into the EngineStats of
// include/nimble/runtime/stats.hpp. Cheap (one relaxed atomic add each), so
// they may be called on hot paths.
#pragma once

#include <cstdint>

namespace nimble::stats {

/// One kernel compiled, which took `nanoseconds` of wall-clock time.
void count_kernel_compiled(std::uint64_t nanoseconds) noexcept;

/// `n` kernel launches.
void count_kernel_launches(std::uint64_t n = 1) noexcept;

}  // namespace nimble::stats
