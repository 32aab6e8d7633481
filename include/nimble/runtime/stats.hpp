// Counters of the engine's work — kernels compiled and launched, compile time,
// system allocations, peak memory — for benches, tests and hosts that watch
// steady-state cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nimble {

/// What the engine did since the last reset_engine_stats() (or process start),
/// summed over all threads. Counters of parts that do not exist yet (the VM,
/// the JIT) stay 0 until those parts count.
struct EngineStats {
  std::uint64_t kernels_compiled = 0;    ///< kernels JIT-compiled (one per specialization)
  double compile_ms = 0;                 ///< wall-clock milliseconds spent compiling them
  std::uint64_t kernel_launches = 0;     ///< kernel calls made by the VM
  std::uint64_t system_allocations = 0;  ///< CPU allocator requests served by the system
  std::size_t peak_bytes = 0;            ///< CPU allocator's peak live bytes
};

/// The counters since the last reset. Thread-safe; each counter is read
/// atomically, but work running concurrently may show in some and not others.
[[nodiscard]] EngineStats engine_stats() noexcept;

/// One kernel compilation, as the JIT records it.
struct KernelCompileRecord {
  std::string name;   ///< the primitive's name, e.g. "dense_7"
  double ms = 0;      ///< wall-clock milliseconds from primitive source to callable code
};

/// Every kernel compiled since the last reset, in the order they finished.
/// Thread-safe.
[[nodiscard]] std::vector<KernelCompileRecord> kernel_compile_log();

/// Restarts every counter from zero, including the CPU allocator's peak of
/// live bytes (PooledCpuAllocator::reset_peak, which other readers of
/// cpu_allocator().stats() see too). Thread-safe.
void reset_engine_stats() noexcept;

}  // namespace nimble
