// detail::deferred_delete (nimble/support/ref_counted.hpp): iterative
// teardown of user-sized chains and trees of reference-counted nodes.

#include <cstdint>
#include <vector>

#include "nimble/support/ref_counted.hpp"

namespace nimble::detail {

namespace {
struct PendingDelete {
  const void* object;
  void (*deleter)(const void*);
};

// Trivially destructible, so that it has no thread-exit destructor: objects
// released by other thread-local or static destructors (at thread or process
// exit) still find it intact. Most teardowns fit the inline slots; a deep
// one spills into a vector that lives until its teardown ends.
struct TeardownQueue {
  static constexpr std::uint32_t kInline = 32;
  bool running;
  std::uint32_t inline_count;
  PendingDelete inline_items[kInline];
  std::vector<PendingDelete>* overflow;
};

thread_local constinit TeardownQueue queue{};

bool take(TeardownQueue& q, PendingDelete& out) noexcept {
  if (q.overflow && !q.overflow->empty()) {
    out = q.overflow->back();
    q.overflow->pop_back();
    return true;
  }
  if (q.inline_count == 0) return false;
  out = q.inline_items[--q.inline_count];
  return true;
}
}  // namespace

void deferred_delete(const void* object, void (*deleter)(const void*)) noexcept {
  TeardownQueue& q = queue;
  if (q.running) {
    if (q.inline_count < TeardownQueue::kInline) {
      q.inline_items[q.inline_count++] = {object, deleter};
      return;
    }
    try {
      if (!q.overflow) q.overflow = new std::vector<PendingDelete>();
      q.overflow->push_back({object, deleter});
      return;
    } catch (...) {
      // Out of memory for the queue: delete it here, recursing one level
      // deeper (as every delete did before the queue).
    }
    deleter(object);
    return;
  }
  q.running = true;
  deleter(object);
  for (PendingDelete next{}; take(q, next);) next.deleter(next.object);
  delete q.overflow;
  q.overflow = nullptr;
  q.running = false;
}

}  // namespace nimble::detail
