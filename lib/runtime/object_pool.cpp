#include "runtime/object_pool.hpp"

#include <array>
#include <new>
#include "nimble/support/fault_injection.hpp"

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

// Both thread-locals use the initial-exec TLS model: an access is one
// %fs-relative load, not a call to __tls_get_addr (the general-dynamic model
// a shared library's thread-locals get by default; a host invoke of a
// one-kernel program made ~20 such calls, ~220 instructions). The cost: a
// process that loads the runtime with dlopen takes their ~270 bytes from the
// static TLS surplus glibc keeps for that (512 bytes by default since 2.32),
// and dlopen fails ("cannot allocate memory in static TLS block") if other
// such libraries used it up first; linked normally, it costs nothing.
#define NIMBLE_INITIAL_EXEC_TLS [[gnu::tls_model("initial-exec")]]

// Set once this thread's lists are gone (thread exit): later frees on this
// thread go to the system. Trivially destructible, so it can be read then.
NIMBLE_INITIAL_EXEC_TLS thread_local bool lists_destroyed = false;

// Constant-initialized and trivially destructible, so that an access needs
// no guard (a thread-local with a destructor is constructed on first use,
// through a guard that takes a __tls_get_addr call of its own); the blocks
// are given back at thread exit by a Cleanup registered when the first one
// is cached.
struct FreeLists {
  std::array<FreeBlock*, kClasses> head;
  std::array<std::size_t, kClasses> size;
  bool cleanup_registered;
};

NIMBLE_INITIAL_EXEC_TLS thread_local FreeLists lists{};

struct Cleanup {
  Cleanup() = default;
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;
  ~Cleanup() {
    lists_destroyed = true;
    for (std::size_t c = 0; c < kClasses; ++c)
      while (FreeBlock* b = lists.head[c]) {
        lists.head[c] = b->next;
        ::operator delete(b, (c + 1) * kGranule);
      }
  }
};

void register_cleanup() {
  thread_local const Cleanup cleanup;
  lists.cleanup_registered = true;
}

}  // namespace

void* pool_allocate(std::size_t bytes) {
  allocation_point();
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
  if (!lists.cleanup_registered) [[unlikely]]
    register_cleanup();
  auto* b = static_cast<FreeBlock*>(p);
  b->next = lists.head[c];
  lists.head[c] = b;
  ++lists.size[c];
}

}  // namespace nimble::detail
