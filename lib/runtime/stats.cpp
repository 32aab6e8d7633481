#include "nimble/runtime/stats.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <utility>

#include "nimble/runtime/allocator.hpp"
#include "runtime/stats_counters.hpp"

#include <fmt/format.h>
#include "runtime/trace.hpp"

namespace nimble {
namespace {

using Counter = std::atomic<std::uint64_t>;

struct Counters {
  Counter kernels_compiled{0};
  Counter specialized_compiled{0};
  Counter compile_ns{0};
  Counter kernel_launches{0};
  Counter call_site_hits{0};
  Counter memory_hits{0};
  Counter memory_misses{0};
  Counter disk_hits{0};
  Counter disk_misses{0};
  Counter disk_rejected{0};
  Counter disk_load_ns{0};
  std::atomic<std::int64_t> specializations_pending{0};  // a gauge: not reset
  Counter specializations_failed{0};
  Counter buckets_over_limit{0};
  // The allocator counts system allocations since it was created; a reset
  // remembers where it stood.
  Counter system_allocations_base{0};
  std::mutex log_mutex;  // compilations are rare (milliseconds each): a lock is fine
  std::vector<KernelCompileRecord> compile_log;
};

Counters& counters() noexcept {
  static Counters c;
  return c;
}

void add(Counter& c, std::uint64_t n = 1) noexcept { c.fetch_add(n, std::memory_order_relaxed); }
std::uint64_t read(const Counter& c) noexcept { return c.load(std::memory_order_relaxed); }

// The phase times of the kernel the calling thread is compiling.
std::array<std::uint64_t, 3>& thread_phases() noexcept {
  thread_local std::array<std::uint64_t, 3> phases{};
  return phases;
}

}  // namespace

void stats::add_compile_phase(CompilePhase phase, std::uint64_t nanoseconds) noexcept {
  thread_phases()[static_cast<std::size_t>(phase)] += nanoseconds;
}

void stats::begin_kernel_compile() noexcept { thread_phases() = {}; }

void stats::count_kernel_compiled(std::string_view name, std::string_view bucket,
                                  std::uint64_t nanoseconds) {
  if (trace::recording()) {
    try {  // out of memory, the trace loses the event, not the kernel
      const auto end = trace::Clock::now();
      trace::complete(fmt::format("compile {} {}", name, bucket.empty() ? "(generic)" : bucket), "compile",
                      end - std::chrono::nanoseconds(nanoseconds), end,
                      fmt::format(R"("kernel": {}, "bucket": {})", trace::quoted(name),
                                  trace::quoted(bucket.empty() ? "generic" : bucket)));
    } catch (...) {
    }
  }
  Counters& c = counters();
  add(c.kernels_compiled);
  if (!bucket.empty()) add(c.specialized_compiled);
  add(c.compile_ns, nanoseconds);
  const auto ms = [](std::uint64_t ns) { return static_cast<double>(ns) * 1e-6; };
  const std::array<std::uint64_t, 3> phases = std::exchange(thread_phases(), {});
  KernelCompileRecord record{.name = std::string(name),
                             .bucket = std::string(bucket),
                             .ms = ms(nanoseconds),
                             .optimize_ms = ms(phases[0]),
                             .codegen_ms = ms(phases[1]),
                             .link_ms = ms(phases[2])};
  // Clamped: the phases are timed apart from the whole.
  record.lower_ms = std::max(0.0, record.ms - record.optimize_ms - record.codegen_ms - record.link_ms);
  std::lock_guard lock(c.log_mutex);
  c.compile_log.push_back(std::move(record));
}

std::vector<KernelCompileRecord> kernel_compile_log() {
  Counters& c = counters();
  std::lock_guard lock(c.log_mutex);
  return c.compile_log;
}

void stats::count_kernel_launches(std::uint64_t n, std::uint64_t site_hits) noexcept {
  add(counters().kernel_launches, n);
  add(counters().call_site_hits, site_hits);
}

void stats::count_memory_lookup(bool hit) noexcept {
  add(hit ? counters().memory_hits : counters().memory_misses);
}

void stats::count_disk_hit(std::uint64_t nanoseconds) noexcept {
  if (trace::recording()) {
    const auto end = trace::Clock::now();
    trace::complete("disk cache load", "disk", end - std::chrono::nanoseconds(nanoseconds), end);
  }
  add(counters().disk_hits);
  add(counters().disk_load_ns, nanoseconds);
}
void stats::count_disk_miss() noexcept { add(counters().disk_misses); }
void stats::count_disk_rejected() noexcept { add(counters().disk_rejected); }

void stats::count_specialization_pending(int delta) noexcept {
  counters().specializations_pending.fetch_add(delta, std::memory_order_relaxed);
}
void stats::count_specialization_failed() noexcept { add(counters().specializations_failed); }
void stats::count_bucket_over_limit() noexcept { add(counters().buckets_over_limit); }

EngineStats engine_stats() noexcept {
  const Counters& c = counters();
  const AllocatorStats alloc = cpu_allocator().stats();
  EngineStats s;
  s.kernels_compiled = read(c.kernels_compiled);
  s.specialized_compiled = read(c.specialized_compiled);
  s.compile_ms = static_cast<double>(read(c.compile_ns)) * 1e-6;
  s.kernel_launches = read(c.kernel_launches);
  s.call_site_hits = read(c.call_site_hits);
  s.memory_hits = read(c.memory_hits);
  s.memory_misses = read(c.memory_misses);
  s.disk_hits = read(c.disk_hits);
  s.disk_misses = read(c.disk_misses);
  s.disk_rejected = read(c.disk_rejected);
  s.disk_load_ms = static_cast<double>(read(c.disk_load_ns)) * 1e-6;
  s.specializations_pending =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, c.specializations_pending.load()));
  s.specializations_failed = read(c.specializations_failed);
  s.buckets_over_limit = read(c.buckets_over_limit);
  s.system_allocations = alloc.system_allocations - read(c.system_allocations_base);
  s.peak_bytes = alloc.peak_live_bytes;
  return s;
}

void reset_engine_stats() noexcept {
  Counters& c = counters();
  for (Counter* counter :
       {&c.kernels_compiled, &c.specialized_compiled, &c.compile_ns, &c.kernel_launches,
        &c.call_site_hits, &c.memory_hits, &c.memory_misses, &c.disk_hits, &c.disk_misses,
        &c.disk_rejected, &c.disk_load_ns, &c.specializations_failed, &c.buckets_over_limit})
    counter->store(0, std::memory_order_relaxed);
  {
    std::lock_guard lock(c.log_mutex);
    c.compile_log.clear();
  }
  PooledCpuAllocator& alloc = cpu_allocator();
  c.system_allocations_base.store(alloc.stats().system_allocations, std::memory_order_relaxed);
  alloc.reset_peak();
}

}  // namespace nimble
