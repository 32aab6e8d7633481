// Device memory of one GPU, pooled by size class as the CPU's is
// (PooledCpuAllocator::size_class_bytes), so that a warm workload with the
// same sizes calls neither cuMemAlloc nor cuMemFree. The memory plan's
// storages live here when a program runs on the GPU.
#pragma once

#include <memory>
#include <mutex>

#include "nimble/runtime/allocator.hpp"
#include "runtime/cuda/context.hpp"
#include "runtime/cuda/stream.hpp"

namespace nimble::cuda {

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(std::shared_ptr<const Context> context);
  /// Gives the cached blocks back to the driver. Blocks still handed out
  /// stay allocated (their tensors outlive the allocator: a bug of the
  /// caller that must not become a use-after-free on the device).
  ~DeviceAllocator() override;
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  /// A device address (not readable on the host). When the driver is out of
  /// memory, the pool is given back and the allocation tried once more;
  /// then throws Error(runtime_error) naming the device, the size and what
  /// is live and cached.
  [[nodiscard]] void* allocate(std::size_t nbytes) override;
  void deallocate(void* ptr, std::size_t nbytes) noexcept override;
  [[nodiscard]] AllocatorStats stats() const noexcept override;
  [[nodiscard]] Device device() const noexcept override;
  [[nodiscard]] bool host_accessible() const noexcept override { return false; }

  /// Copies on the calling VM's stream (scoped_stream), or outside a VM on
  /// a stream of the allocator's own, and waits for them: the bytes are
  /// there for kernels launched afterwards on any stream.
  void copy_from_host(void* dst, const void* src, std::size_t n) override;
  void copy_to_host(void* dst, const void* src, std::size_t n) override;
  void copy_within(void* dst, const void* src, std::size_t n) override;

  /// Frees every cached block.
  void trim() noexcept;

  [[nodiscard]] const Context& context() const noexcept { return *context_; }
  [[nodiscard]] const std::shared_ptr<const Context>& shared_context() const noexcept { return context_; }

 private:
  struct Pool;
  Stream& copy_stream();
  // copy(stream) on the scoped stream, or on copy_stream() under copy_mutex_.
  template <class Copy>
  void on_a_stream(Copy&& copy);

  std::shared_ptr<const Context> context_;
  std::unique_ptr<Pool> pool_;
  std::mutex copy_mutex_;
  std::unique_ptr<Stream> copy_stream_;  // made on the first copy
};

/// The process's allocator for GPU `ordinal`, on the process's driver
/// (process_driver()), made on first use and kept for the life of the
/// process; what allocator_for(Device::cuda(ordinal)) returns when no other
/// is registered. Throws Error(not_supported) when there is no driver or no
/// such device.
[[nodiscard]] DeviceAllocator& process_device_allocator(int ordinal);

}  // namespace nimble::cuda
