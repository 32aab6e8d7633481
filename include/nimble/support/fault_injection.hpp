// Failure injection for tests: makes the Nth of nimble's own allocations
// from now fail with std::bad_alloc, as if memory ran out there, to prove
// that every failure point unwinds cleanly (no leak, no corrupt state) and
// surfaces as Error(resource_exhausted) at the API boundary.
//
// The points are nimble's allocations: objects made by make_ref (IR nodes,
// types, patterns, values, closures, kernels), storages and the value pool,
// and the CPU allocator's blocks (tensor data, memory-plan arenas). The
// standard library's and LLVM's allocations are not points (LLVM is built
// without exceptions and cannot unwind one).
//
// Off (the default), a point costs one relaxed load of a global. The
// countdown is shared by every thread; tests run what they inject into on
// one thread (background compilation off) so that the Nth is the same
// point each run.
#pragma once

#include <atomic>
#include <cstdint>

namespace nimble {

/// Arms the injector: the `n`th allocation point from now throws
/// std::bad_alloc (once; then it is off again). n <= 0 turns it off.
void fail_nth_allocation(std::int64_t n) noexcept;
/// Counting without failing: the number of allocation points passed since
/// count_allocations_start(); stops when read.
void count_allocations_start() noexcept;
[[nodiscard]] std::int64_t count_allocations_stop() noexcept;

namespace detail {
/// Points left before the injected failure; 0 when off.
extern std::atomic<std::int64_t> allocation_countdown;
void take_allocation_point();
/// Called at each allocation point.
inline void allocation_point() {
  if (allocation_countdown.load(std::memory_order_relaxed) != 0) [[unlikely]]
    take_allocation_point();
}
}  // namespace detail

}  // namespace nimble
