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
/// summed over all threads. Kernels loaded from an export (the `aot`
/// provider) or served by the reference provider are not compiled: they
/// count as launches and cache lookups only.
struct EngineStats {
  std::uint64_t kernels_compiled = 0;    ///< kernels JIT-compiled: generic and specialized
  std::uint64_t specialized_compiled = 0;  ///< of those, specialized for a bucket
  double compile_ms = 0;                 ///< wall-clock milliseconds spent compiling them
  std::uint64_t kernel_launches = 0;     ///< kernel calls made by the VM
  /// Kernel calls whose call site already held its primitive's kernel (no
  /// lookup beyond the site's bucket table).
  std::uint64_t call_site_hits = 0;
  std::uint64_t memory_hits = 0;    ///< KernelCache lookups that found the kernel
  std::uint64_t memory_misses = 0;  ///< ... that asked a provider
  std::uint64_t disk_hits = 0;      ///< kernels loaded from the disk cache instead of compiled
  std::uint64_t disk_misses = 0;    ///< kernels not in it (then compiled and stored)
  std::uint64_t disk_rejected = 0;  ///< entries found corrupt, truncated or foreign (rebuilt)
  double disk_load_ms = 0;          ///< wall-clock milliseconds loading kernels from disk
  std::uint64_t specializations_pending = 0;  ///< compiling in the background now
  std::uint64_t specializations_failed = 0;   ///< threw: the generic kernel serves their bucket
  /// Calls in a new bucket of a primitive that had its limit of specialized
  /// kernels (BucketPolicy::max_specialized_per_function): the generic served.
  std::uint64_t buckets_over_limit = 0;
  std::uint64_t system_allocations = 0;  ///< CPU allocator requests served by the system
  std::size_t peak_bytes = 0;            ///< CPU allocator's peak live bytes
};

/// The counters since the last reset. Thread-safe; each counter is read
/// atomically, but work running concurrently may show in some and not others.
[[nodiscard]] EngineStats engine_stats() noexcept;

/// One kernel compilation, as the JIT records it.
struct KernelCompileRecord {
  std::string name;   ///< the primitive's name, e.g. "dense_7"
  std::string bucket; ///< the bucket it is specialized for (Bucket::to_string), "" if generic
  double ms = 0;      ///< wall-clock milliseconds from primitive source to callable code
  /// Where `ms` went. LLVM's optimization passes over the kernel's IR:
  double optimize_ms = 0;
  /// LLVM's code generation: instruction selection to register allocation
  /// and the object file (for a GPU kernel also its PTX):
  double codegen_ms = 0;
  /// Making the code callable: linking the object into the process (ORC),
  /// for a GPU kernel also the driver loading its PTX:
  double link_ms = 0;
  /// The rest: lowering the primitive to the kernel IR, emitting and
  /// verifying LLVM IR, the disk cache's lookup (a rejected entry's load
  /// included) and store, a thread's first target machine.
  double lower_ms = 0;
};

/// Every kernel compiled since the last reset, in the order they finished.
/// Thread-safe.
[[nodiscard]] std::vector<KernelCompileRecord> kernel_compile_log();

/// Restarts every counter from zero, including the CPU allocator's peak of
/// live bytes (PooledCpuAllocator::reset_peak, which other readers of
/// cpu_allocator().stats() see too). Thread-safe.
void reset_engine_stats() noexcept;

}  // namespace nimble
