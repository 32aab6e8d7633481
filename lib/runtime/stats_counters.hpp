// Internal: how the VM and the JIT count their work into the EngineStats of
// include/nimble/runtime/stats.hpp. Cheap (one relaxed atomic add each), so
// they may be called on hot paths.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace nimble::stats {

/// Wall-clock nanoseconds from `start` to now, as the counters take them.
[[nodiscard]] inline std::uint64_t nanoseconds_since(std::chrono::steady_clock::time_point start) noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

/// The phases of a kernel's compilation that KernelCompileRecord splits
/// its time into (the rest is `lower_ms`).
enum class CompilePhase : std::uint8_t { optimize, codegen, link };

/// Adds `nanoseconds` to `phase` of the kernel the calling thread is
/// compiling (a kernel compiles on one thread, from the lowering of its
/// primitive to count_kernel_compiled). Outside a compilation (an export's
/// objects), the time goes to the next kernel's record, or nowhere: call
/// begin_kernel_compile() first.
void add_compile_phase(CompilePhase phase, std::uint64_t nanoseconds) noexcept;

/// Starts the calling thread's phase times of a kernel from zero.
void begin_kernel_compile() noexcept;

/// Kernel `name` compiled for `bucket` ("" generic), which took
/// `nanoseconds` of wall-clock time (also appended to kernel_compile_log(),
/// with the phases the calling thread added since begin_kernel_compile()).
void count_kernel_compiled(std::string_view name, std::string_view bucket, std::uint64_t nanoseconds);

/// `n` kernel launches, `site_hits` of them with the call site's kernel at hand.
void count_kernel_launches(std::uint64_t n, std::uint64_t site_hits) noexcept;

/// A KernelCache lookup that found (hit) or built the kernel.
void count_memory_lookup(bool hit) noexcept;

/// The disk cache: a kernel loaded in `nanoseconds`, not found, or an entry rejected.
void count_disk_hit(std::uint64_t nanoseconds) noexcept;
void count_disk_miss() noexcept;
void count_disk_rejected() noexcept;

/// Background specializations: one more (+1) or one fewer (-1) pending.
void count_specialization_pending(int delta) noexcept;
void count_specialization_failed() noexcept;
void count_bucket_over_limit() noexcept;

}  // namespace nimble::stats
