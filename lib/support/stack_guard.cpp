#include "support/stack_guard.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstddef>

#include "support/check.hpp"

namespace nimble::detail {

thread_local constinit std::uintptr_t stack_floor = UINTPTR_MAX;

namespace {
thread_local constinit std::uintptr_t stack_base = 0;  // the stack's lowest address

void init_stack_floor() noexcept {
  pthread_attr_t attr;
  void* addr = nullptr;
  std::size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    if (pthread_attr_getstack(&attr, &addr, &size) != 0) size = 0;
    pthread_attr_destroy(&attr);
  }
  if (size == 0) {  // unknown: never throw
    stack_floor = 0;
    return;
  }
  const std::size_t reserve = std::min<std::size_t>(std::size_t{1} << 20, size / 4);
  stack_base = reinterpret_cast<std::uintptr_t>(addr);
  stack_floor = stack_base + reserve;
}
}  // namespace

void stack_below_floor(std::uintptr_t frame, const char* walk) {
  if (stack_floor == UINTPTR_MAX) {
    init_stack_floor();
    if (frame >= stack_floor) return;
  }
  if (frame < stack_base) return;  // another stack than the thread's own
  throw_error(ErrorKind::resource_exhausted,
              "{}: nesting too deep (this thread's stack is nearly used up; a deeper structure "
              "needs a thread with a larger stack)",
              walk);
}

}  // namespace nimble::detail
