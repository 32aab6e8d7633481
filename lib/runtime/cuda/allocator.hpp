// Device memory of one GPU, pooled by size class as the CPU's is
// (PooledCpuAllocator::size_class_bytes), so that a warm workload with the
// same sizes calls neither cuMemAlloc nor cuMemFree. The memory plan's
// storages live here when a program runs on the GPU.
#pragma once

#include <memory>

#include "nimble/runtime/allocator.hpp"
#include "runtime/cuda/context.hpp"

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

  /// Frees every cached block.
  void trim() noexcept;

  [[nodiscard]] const Context& context() const noexcept { return *context_; }

 private:
  struct Pool;
  std::shared_ptr<const Context> context_;
  std::unique_ptr<Pool> pool_;
};

}  // namespace nimble::cuda
