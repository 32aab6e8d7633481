#include "nimble/runtime/stats.hpp"

#include <atomic>
#include <mutex>

#include "nimble/runtime/allocator.hpp"
#include "runtime/stats_counters.hpp"

namespace nimble {
namespace {

struct Counters {
  std::atomic<std::uint64_t> kernels_compiled{0};
  std::atomic<std::uint64_t> compile_ns{0};
  std::atomic<std::uint64_t> kernel_launches{0};
  // The allocator counts system allocations since it was created; a reset
  // remembers where it stood.
  std::atomic<std::uint64_t> system_allocations_base{0};
  std::mutex log_mutex;  // compilations are rare (milliseconds each): a lock is fine
  std::vector<KernelCompileRecord> compile_log;
};

Counters& counters() noexcept {
  static Counters c;
  return c;
}

}  // namespace

void stats::count_kernel_compiled(std::string_view name, std::uint64_t nanoseconds) {
  Counters& c = counters();
  c.kernels_compiled.fetch_add(1, std::memory_order_relaxed);
  c.compile_ns.fetch_add(nanoseconds, std::memory_order_relaxed);
  std::lock_guard lock(c.log_mutex);
  c.compile_log.push_back({std::string(name), static_cast<double>(nanoseconds) * 1e-6});
}

std::vector<KernelCompileRecord> kernel_compile_log() {
  Counters& c = counters();
  std::lock_guard lock(c.log_mutex);
  return c.compile_log;
}

void stats::count_kernel_launches(std::uint64_t n) noexcept {
  counters().kernel_launches.fetch_add(n, std::memory_order_relaxed);
}

EngineStats engine_stats() noexcept {
  const Counters& c = counters();
  const AllocatorStats alloc = cpu_allocator().stats();
  EngineStats s;
  s.kernels_compiled = c.kernels_compiled.load(std::memory_order_relaxed);
  s.compile_ms = static_cast<double>(c.compile_ns.load(std::memory_order_relaxed)) * 1e-6;
  s.kernel_launches = c.kernel_launches.load(std::memory_order_relaxed);
  s.system_allocations =
      alloc.system_allocations - c.system_allocations_base.load(std::memory_order_relaxed);
  s.peak_bytes = alloc.peak_live_bytes;
  return s;
}

void reset_engine_stats() noexcept {
  Counters& c = counters();
  c.kernels_compiled.store(0, std::memory_order_relaxed);
  c.compile_ns.store(0, std::memory_order_relaxed);
  c.kernel_launches.store(0, std::memory_order_relaxed);
  {
    std::lock_guard lock(c.log_mutex);
    c.compile_log.clear();
  }
  PooledCpuAllocator& alloc = cpu_allocator();
  c.system_allocations_base.store(alloc.stats().system_allocations, std::memory_order_relaxed);
  alloc.reset_peak();
}

}  // namespace nimble
