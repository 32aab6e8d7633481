// A GPU and its primary context: the context the CUDA runtime and other
// libraries in the process share, retained while this object lives.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/cuda/driver.hpp"

namespace nimble::cuda {

class Context {
 public:
  /// Retains device `ordinal`'s primary context. Throws Error(not_supported)
  /// when the driver has no such device ("no CUDA device" when it has none).
  [[nodiscard]] static std::shared_ptr<const Context> open(std::shared_ptr<const Driver> driver, int ordinal);

  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  [[nodiscard]] const Driver& driver() const noexcept { return *driver_; }
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Major * 10 + minor: 90 for sm_90.
  [[nodiscard]] int compute_capability() const noexcept { return compute_capability_; }
  [[nodiscard]] int multiprocessors() const noexcept { return multiprocessors_; }
  [[nodiscard]] int max_threads_per_block() const noexcept { return max_threads_per_block_; }
  [[nodiscard]] std::size_t total_memory() const noexcept { return total_memory_; }

  /// Makes this context the calling thread's current one; every object that
  /// calls the driver in this context does so first (a thread may have used
  /// another device, or none, since).
  void make_current() const;

 private:
  Context() = default;
  std::shared_ptr<const Driver> driver_;
  int ordinal_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
  int compute_capability_ = 0;
  int multiprocessors_ = 0;
  int max_threads_per_block_ = 0;
  std::size_t total_memory_ = 0;
};

}  // namespace nimble::cuda
