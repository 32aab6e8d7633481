// A reference-counted block of device memory that tensors view.
#pragma once

#include <cstddef>

#include "nimble/runtime/allocator.hpp"
#include "nimble/runtime/device.hpp"
#include "nimble/support/ref_counted.hpp"

namespace nimble {

/// Either owned (allocated from an Allocator, returned to it when the last
/// reference goes) or borrowed (memory the host owns; nimble never frees it,
/// and the host keeps it alive while any tensor over it is in use).
/// Counting is thread-safe; the bytes themselves are not synchronized.
class Storage final : public RefCounted {
 public:
  /// Uninitialized memory from the allocator of `device`.
  [[nodiscard]] static Ref<Storage> allocate(std::size_t nbytes, Device device);
  /// Uninitialized memory from `allocator`, which must outlive the storage.
  [[nodiscard]] static Ref<Storage> allocate(std::size_t nbytes, Allocator& allocator);
  /// Wraps `nbytes` of host-owned memory at `data` without copying.
  [[nodiscard]] static Ref<Storage> borrow(void* data, std::size_t nbytes, Device device);

  ~Storage();

  /// Storage handles come from the runtime's small-object pool (one per
  /// kernel output: warm inference does not ask the system for them).
  static void* operator new(std::size_t bytes);
  static void operator delete(void* p, std::size_t bytes) noexcept;

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t nbytes() const noexcept { return nbytes_; }
  [[nodiscard]] Device device() const noexcept { return device_; }
  [[nodiscard]] bool is_borrowed() const noexcept { return allocator_ == nullptr; }
  /// The allocator this memory came from; for borrowed memory, the device's
  /// (allocator_for(device())), which copies to and from it.
  [[nodiscard]] Allocator& allocator() const { return allocator_ != nullptr ? *allocator_ : allocator_for(device_); }
  /// Whether the host reads and writes these bytes directly (the CPU's
  /// memory, or another device's whose allocator says so).
  [[nodiscard]] bool host_accessible() const noexcept {
    return device_.is_cpu() || (allocator_ != nullptr && allocator_->host_accessible());
  }

 private:
  Storage(void* data, std::size_t nbytes, Device device, Allocator* allocator) noexcept
      : data_(data), nbytes_(nbytes), device_(device), allocator_(allocator) {}

  void* data_;
  std::size_t nbytes_;
  Device device_;
  Allocator* allocator_;  // null when borrowed
};

}  // namespace nimble
