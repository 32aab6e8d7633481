// A stream of one GPU: copies between host and device, and kernel launches,
// in order. Each VirtualMachine has one a GPU it runs on, and while it runs
// (StreamScope) its kernels launch and the device allocator copies there:
// a VM's work is ordered on its own stream, and VMs on other threads do not
// wait for it. Outside a VM, a GPU kernel launches on a stream of its own
// and the allocator copies on another. Each kernel and copy is still waited
// for before its call returns (a kernel reads its status word back).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
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

/// While it lives, this thread's work on the GPUs of `streams` — kernels'
/// launches (CudaStages) and the device allocator's copies — goes on them
/// (one a GPU; the innermost scope of a thread wins), not on the kernel's
/// or the allocator's own. The streams outlive the scope.
class StreamScope {
 public:
  explicit StreamScope(std::span<Stream* const> streams) noexcept;
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  std::span<Stream* const> streams_;
  const StreamScope* outer_;
  friend Stream* scoped_stream(const Context& context) noexcept;
};

/// The stream of this thread's innermost StreamScope for `context`'s GPU
/// (the same driver and device: its primary context), or null.
[[nodiscard]] Stream* scoped_stream(const Context& context) noexcept;

}  // namespace nimble::cuda
