// Internal: how the VM and the JIT count their work into the EngineStats of
// include/nimble/runtime/stats.hpp. Cheap (one relaxed atomic add each), so
// they may be called on hot paths.
#pragma once

#include <cstdint>
#include <string_view>

namespace nimble::stats {

/// Kernel `name` compiled, which took `nanoseconds` of wall-clock time
/// (also appended to kernel_compile_log()).
void count_kernel_compiled(std::string_view name, std::uint64_t nanoseconds);

/// `n` kernel launches.
void count_kernel_launches(std::uint64_t n = 1) noexcept;

}  // namespace nimble::stats
