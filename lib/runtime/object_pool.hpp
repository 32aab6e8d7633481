// Memory for the runtime's small objects that come and go with every kernel
// call and every Value: Storage handles and ValueNodes. A thread-local free
// list per 16-byte size class hands blocks back out, so that warm inference
// reuses them instead of asking the system (the pooled CPU allocator does
// the same for tensor bytes). Blocks freed on another thread join that
// thread's lists; each list keeps at most kMaxCached blocks, the rest go back
// to the system. Under AddressSanitizer every block goes to the system, so
// that a use after free is still caught.
#pragma once

#include <cstddef>

namespace nimble::detail {

[[nodiscard]] void* pool_allocate(std::size_t bytes);
void pool_deallocate(void* p, std::size_t bytes) noexcept;

/// A standard allocator over the pool, for the small arrays that come and go
/// with Values (the fields of tuples and ADT values).
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() noexcept = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit
  [[nodiscard]] T* allocate(std::size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }
  template <class U>
  friend bool operator==(const PoolAllocator&, const PoolAllocator<U>&) noexcept {
    return true;
  }
};

}  // namespace nimble::detail
