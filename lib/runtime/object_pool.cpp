#include "runtime/object_pool.hpp"

#include <array>
#include <new>

namespace nimble::detail {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif

constexpr std::size_t kGranule = 16;
constexpr std::size_t kClasses = 16;  // blocks up to 256 bytes
constexpr std::size_t kMaxCached = 4096;

struct FreeBlock {
  FreeBlock* next;
};

// Set once this thread's lists are gone (thread exit): later frees on this
// thread go to the system. Trivially destructible, so it can be read then.
thread_local bool lists_destroyed = false;

struct FreeLists {
  std::array<FreeBlock*, kClasses> head{};
  std::array<std::size_t, kClasses> size{};

  FreeLists() = default;
  FreeLists(const FreeLists&) = delete;
  FreeLists& operator=(const FreeLists&) = delete;
  ~FreeLists() {
    lists_destroyed = true;
    for (std::size_t c = 0; c < kClasses; ++c)
      while (FreeBlock* b = head[c]) {
        head[c] = b->next;
        ::operator delete(b, (c + 1) * kGranule);
      }
  }
};

thread_local FreeLists lists;

}  // namespace

void* pool_allocate(std::size_t bytes) {
  const std::size_t c = (bytes + kGranule - 1) / kGranule - 1;
  if (!kPooled || bytes == 0 || c >= kClasses || lists_destroyed) return ::operator new(bytes);
  if (FreeBlock* b = lists.head[c]) {
    lists.head[c] = b->next;
    --lists.size[c];
    return b;
  }
  return ::operator new((c + 1) * kGranule);
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  const std::size_t c = (bytes + kGranule - 1) / kGranule - 1;
  if (!kPooled || bytes == 0 || c >= kClasses) {
    ::operator delete(p);
    return;
  }
  if (lists_destroyed || lists.size[c] >= kMaxCached) {
    ::operator delete(p, (c + 1) * kGranule);
    return;
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = lists.head[c];
  lists.head[c] = b;
  ++lists.size[c];
}

}  // namespace nimble::detail
