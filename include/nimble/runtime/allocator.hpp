// Device memory allocators, and the pooled CPU allocator every CPU tensor uses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nimble/runtime/device.hpp"

namespace nimble {

/// Counters an allocator keeps; tests and benches read them to check that
/// steady-state inference makes no system allocation.
struct AllocatorStats {
  std::size_t live_bytes = 0;       ///< bytes handed out and not yet returned (as requested)
  std::size_t peak_live_bytes = 0;  ///< maximum of live_bytes since the last reset_peak()
  std::size_t cached_bytes = 0;     ///< bytes held in the pool, ready for reuse
  std::uint64_t allocations = 0;    ///< calls to allocate() with a non-zero size
  std::uint64_t pool_hits = 0;      ///< allocations served from the pool
  std::uint64_t system_allocations = 0;  ///< allocations that went to the system
  std::uint64_t system_frees = 0;        ///< blocks given back to the system (trim())
};

/// Allocates device memory. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns `nbytes` bytes aligned to kAlignment, or throws
  /// Error(resource_exhausted) when the device is out of memory. `nbytes == 0` returns nullptr.
  [[nodiscard]] virtual void* allocate(std::size_t nbytes) = 0;
  /// Returns a block from allocate(); `nbytes` must be the size asked for.
  virtual void deallocate(void* ptr, std::size_t nbytes) noexcept = 0;
  [[nodiscard]] virtual AllocatorStats stats() const noexcept = 0;
  [[nodiscard]] virtual Device device() const noexcept = 0;
  /// Whether the host reads and writes this memory directly (the CPU's does;
  /// a GPU's does not): host kernels may run on it and copies to and from it
  /// are memcpy.
  [[nodiscard]] virtual bool host_accessible() const noexcept { return true; }

  /// Copies `n` bytes of host memory at `src` to `dst`, a block (or part of
  /// one) of this allocator's memory. Returns when `src` may be reused and
  /// the bytes are there for every kernel launched afterwards. By default:
  /// memcpy for host-accessible memory, Error(not_supported) otherwise.
  /// Throws Error(runtime_error) when the device fails.
  virtual void copy_from_host(void* dst, const void* src, std::size_t n);
  /// Copies `n` bytes of this allocator's memory at `src` to host memory at
  /// `dst`, after the work queued on the device before; returns when they are there.
  virtual void copy_to_host(void* dst, const void* src, std::size_t n);
  /// Copies `n` bytes between two places in this allocator's memory.
  virtual void copy_within(void* dst, const void* src, std::size_t n);

  /// Alignment of every block: a cache line, and a full AVX-512 vector.
  static constexpr std::size_t kAlignment = 64;
};

/// A CPU allocator that pools freed blocks by size class (four classes per
/// power of two, so at most 25% of a block is slack; blocks of 16 KiB and
/// more start on a 4 KiB page) and reuses them, so that
/// a warm workload with the same sizes makes no system allocation.
/// Thread-safe: one lock per size class.
class PooledCpuAllocator final : public Allocator {
 public:
  PooledCpuAllocator();
  ~PooledCpuAllocator() override;
  PooledCpuAllocator(const PooledCpuAllocator&) = delete;
  PooledCpuAllocator& operator=(const PooledCpuAllocator&) = delete;

  [[nodiscard]] void* allocate(std::size_t nbytes) override;
  void deallocate(void* ptr, std::size_t nbytes) noexcept override;
  [[nodiscard]] AllocatorStats stats() const noexcept override;
  [[nodiscard]] Device device() const noexcept override { return Device::cpu(); }

  /// Gives every cached block back to the system.
  void trim() noexcept;
  /// Freed blocks beyond this many cached bytes go back to the system at once
  /// (default 1 GiB), so a workload with ever-new sizes cannot hoard memory.
  void set_max_cached_bytes(std::size_t bytes) noexcept;
  /// Restarts peak_live_bytes from the current live_bytes.
  void reset_peak() noexcept;

  /// The size of the block that serves a request of `nbytes` (its size class).
  [[nodiscard]] static std::size_t size_class_bytes(std::size_t nbytes) noexcept;

 private:
  struct Pool;
  Pool* pool_;
};

/// The process-wide CPU allocator (never destroyed, so tensors that outlive
/// main's locals stay valid).
[[nodiscard]] PooledCpuAllocator& cpu_allocator() noexcept;

/// The allocator for `device`. Throws Error(not_supported) for a device that
/// has no allocator in this build or on this machine.
[[nodiscard]] Allocator& allocator_for(Device device);

/// Makes `allocator` the one allocator_for(allocator.device()) returns, for
/// a device other than the CPU (the GPU backend registers its devices; tests
/// register host memory as a second device). It must outlive every tensor
/// allocated through it. unregister_allocator(device) undoes it.
void register_allocator(Allocator& allocator);
void unregister_allocator(Device device);

}  // namespace nimble
