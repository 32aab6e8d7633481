#include "nimble/support/fault_injection.hpp"

#include <limits>
#include <new>

namespace nimble {
namespace detail {

std::atomic<std::int64_t> allocation_countdown{0};

namespace {
// Counting mode starts the countdown here, far from zero, so no point fails.
constexpr std::int64_t kCountingStart = std::numeric_limits<std::int64_t>::max();
}  // namespace

void take_allocation_point() {
  // fetch_sub on a countdown that another thread may have just disarmed:
  // only the thread that takes it from 1 to 0 fails.
  std::int64_t left = allocation_countdown.load(std::memory_order_relaxed);
  while (left > 0) {
    if (allocation_countdown.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      if (left == 1) throw std::bad_alloc();
      return;
    }
  }
}

}  // namespace detail

void fail_nth_allocation(std::int64_t n) noexcept {
  detail::allocation_countdown.store(n > 0 ? n : 0, std::memory_order_relaxed);
}

void count_allocations_start() noexcept {
  detail::allocation_countdown.store(detail::kCountingStart, std::memory_order_relaxed);
}

std::int64_t count_allocations_stop() noexcept {
  const std::int64_t left = detail::allocation_countdown.exchange(0, std::memory_order_relaxed);
  return left == 0 ? 0 : detail::kCountingStart - left;
}

}  // namespace nimble
