#include "nimble/runtime/threading.hpp"

#include <oneapi/tbb/global_control.h>

#include <memory>
#include <mutex>

#include "support/check.hpp"

namespace nimble {
namespace {

// The process-wide limit: one global_control, replaced under a mutex (oneTBB
// takes the smallest of all live controls, so the old one must go first).
struct ThreadLimit {
  std::mutex mutex;
  std::unique_ptr<oneapi::tbb::global_control> control;
};

ThreadLimit& thread_limit() {
  static ThreadLimit limit;
  return limit;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1)
    throw_error(ErrorKind::invalid_argument, "set_num_threads: n must be at least 1, got {}", n);
  ThreadLimit& limit = thread_limit();
  const std::lock_guard lock(limit.mutex);
  limit.control.reset();
  limit.control = std::make_unique<oneapi::tbb::global_control>(
      oneapi::tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(n));
}

int num_threads() noexcept {
  return static_cast<int>(oneapi::tbb::global_control::active_value(
      oneapi::tbb::global_control::max_allowed_parallelism));
}

}  // namespace nimble
