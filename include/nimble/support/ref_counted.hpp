// Intrusive reference counting for objects shared by handles (storage, and
// later IR nodes and VM objects): one atomic counter in the object, no
// separate control block, and a handle copy costs one atomic increment.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "nimble/support/fault_injection.hpp"

namespace nimble {

namespace detail {
/// Deletes `object` with `deleter`; when called while another deferred
/// deletion runs on this thread (a node's members dropping its children),
/// queues it instead, and the outermost call deletes the queue in a loop. So
/// tearing down a chain or tree of a million nodes takes a few stack frames,
/// not a million. Thread-safe (the queue is per thread).
void deferred_delete(const void* object, void (*deleter)(const void*)) noexcept;
}  // namespace detail

/// A RefCounted class whose objects form user-controlled chains or trees
/// (IR nodes, types, patterns) declares `static constexpr bool
/// kDeferredTeardown = true;`: its last Ref deletes it through
/// detail::deferred_delete.
template <class T>
concept DeferredTeardown = std::remove_cv_t<T>::kDeferredTeardown;

/// Base of intrusively counted objects. Thread-safe counting; the object is
/// deleted as the static type held by the last Ref, so a class deleted through
/// a base-class Ref must have a virtual destructor.
class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  [[nodiscard]] std::uint32_t use_count() const noexcept {
    return count_.load(std::memory_order_relaxed);
  }

 protected:
  ~RefCounted() = default;

 private:
  template <class T>
  friend class Ref;
  void retain() const noexcept { count_.fetch_add(1, std::memory_order_relaxed); }
  // The first reference to an object no other thread can see yet: a plain
  // store, not a locked read-modify-write (unless its constructor already
  // took a reference to itself).
  void adopt() const noexcept {
    if (count_.load(std::memory_order_relaxed) == 0)
      count_.store(1, std::memory_order_relaxed);
    else
      retain();
  }
  // Returns true when this was the last reference. The sole owner (a count
  // of 1) needs no read-modify-write to know it: no other thread holds a
  // reference to take or drop, and the acquire load orders this thread
  // after the releases of those that dropped theirs. A locked instruction
  // costs ~10 cycles, and the first one after a kernel also waits for its
  // stores to drain; the VM's call of a kernel dropped a dozen of them.
  bool release() const noexcept {
    return count_.load(std::memory_order_acquire) == 1 || count_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }

  mutable std::atomic<std::uint32_t> count_{0};
};

/// An owning handle to a RefCounted `T`; null by default.
template <class T>
class Ref {
 public:
  Ref() noexcept = default;
  /// Adopts `ptr` (fresh from `new`, or already held by other Refs).
  explicit Ref(T* ptr) noexcept : ptr_(ptr) {
    if (ptr_) ptr_->retain();
  }
  /// What Ref(fresh, Ref<T>::fresh) adopts: an object just made by `new`
  /// that no other thread can see (make_ref's).
  struct Fresh {};
  static constexpr Fresh fresh{};
  /// Adopts `ptr`, fresh from `new`: its first reference, set without an
  /// atomic read-modify-write.
  Ref(T* ptr, Fresh /*tag*/) noexcept : ptr_(ptr) {
    if (ptr_) ptr_->adopt();
  }
  Ref(const Ref& other) noexcept : Ref(other.ptr_) {}
  Ref(Ref&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  template <class U>
  Ref(const Ref<U>& other) noexcept : Ref(other.get()) {}  // NOLINT: implicit upcast
  ~Ref() { reset(); }

  Ref& operator=(Ref other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }

  // Inline down to the counter: most resets are of moved-from (null) handles
  // or drop one of several references, and a call out of line for those cost
  // the VM ~200 instructions a kernel call.
  void reset() noexcept {
    T* const p = std::exchange(ptr_, nullptr);
    if (p && p->release()) [[unlikely]]
      destroy(p);
  }

  [[nodiscard]] T* get() const noexcept { return ptr_; }
  T* operator->() const noexcept { return ptr_; }
  T& operator*() const noexcept { return *ptr_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  friend bool operator==(const Ref& a, const Ref& b) noexcept { return a.ptr_ == b.ptr_; }

 private:
  [[gnu::noinline]] static void destroy(T* p) noexcept {
    if constexpr (DeferredTeardown<T>)
      detail::deferred_delete(p, [](const void* q) { delete static_cast<T*>(const_cast<void*>(q)); });
    else
      delete p;
  }

  T* ptr_ = nullptr;
};

/// Creates a `T` and returns the first Ref to it.
template <class T, class... Args>
[[nodiscard]] Ref<T> make_ref(Args&&... args) {
  detail::allocation_point();
  return Ref<T>(new T(std::forward<Args>(args)...), Ref<T>::fresh);
}

}  // namespace nimble
