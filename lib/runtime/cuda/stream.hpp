// A stream of one GPU: copies between host and device, and kernel launches,
// in order. Today a GPU kernel launches on one of its own and the device
// allocator copies on another, each waited for before its call returns;
// one per VirtualMachine (a VM's work ordered, VMs on other threads not
// waiting for it) is the intended use.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string_view>

#include "runtime/cuda/context.hpp"

namespace nimble::cuda {

/// A launch's grid of blocks and threads per block; each dim at least 1.
struct LaunchConfig {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  unsigned shared_bytes = 0;
};

class Stream {
 public:
  explicit Stream(std::shared_ptr<const Context> context);
  /// Waits for the work queued, then destroys the stream.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// Queues a copy of `n` bytes from host memory to device memory. The host
  /// memory may be reused when this returns (pageable memory is staged).
  void copy_to_device(void* device, const void* host, std::size_t n);
  /// Copies `n` bytes from device memory to host memory, after the work
  /// queued before; returns when the bytes are there.
  void copy_to_host(void* host, const void* device, std::size_t n);
  /// Queues a copy between two device addresses of this context.
  void copy_on_device(void* to, const void* from, std::size_t n);

  /// Queues `kernel` over `config` with `args` (one pointer to each
  /// parameter's value, in the order the kernel declares them). Throws
  /// Error(invalid_argument) for a dim of 0 or more threads per block than
  /// the device runs, before the driver sees it.
  void launch(CUfunction kernel, const LaunchConfig& config, void** args, std::string_view name);

  /// Returns when every queued operation has finished; a failure of any of
  /// them (a kernel's illegal address …) is thrown here.
  void synchronize();

  [[nodiscard]] const Context& context() const noexcept { return *context_; }

 private:
  std::shared_ptr<const Context> context_;
  CUstream stream_ = nullptr;
};

}  // namespace nimble::cuda
