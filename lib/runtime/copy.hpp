// Copies between the memory of any two devices, for the runtime's own
// kernels and Tensor::to / clone: memcpy where the host reads both sides,
// else through the allocator of the side it does not (the CUDA driver).
#pragma once

#include <cstddef>

#include "nimble/runtime/storage.hpp"
#include "nimble/runtime/tensor.hpp"

namespace nimble::runtime {

/// Copies `n` bytes at `src`, inside storage `from`, to `dst`, inside
/// storage `to`. Throws Error(runtime_error) when a device copy fails.
void copy_bytes(const Storage& to, void* dst, const Storage& from, const void* src, std::size_t n);

/// The address of `t`'s first element wherever it lives (a GPU's memory is
/// not for the host to dereference: pass it to copy_bytes). `t` is defined.
[[nodiscard]] inline std::byte* address_of(const Tensor& t) noexcept {
  return static_cast<std::byte*>(t.storage()->data()) + t.byte_offset();
}

}  // namespace nimble::runtime
