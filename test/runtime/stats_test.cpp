#include "nimble/runtime/stats.hpp"

#include <catch2/catch.hpp>

#include "nimble/runtime/allocator.hpp"
#include "nimble/runtime/tensor.hpp"
#include "runtime/stats_counters.hpp"

using namespace nimble;

TEST_CASE("engine stats count from the last reset", "[runtime]") {
  reset_engine_stats();
  EngineStats s = engine_stats();
  CHECK(s.kernels_compiled == 0);
  CHECK(s.compile_ms == 0);
  CHECK(s.kernel_launches == 0);
  CHECK(s.system_allocations == 0);

  stats::begin_kernel_compile();
  stats::add_compile_phase(stats::CompilePhase::optimize, 400'000);
  stats::add_compile_phase(stats::CompilePhase::codegen, 1'000'000);
  stats::add_compile_phase(stats::CompilePhase::codegen, 600'000);
  stats::add_compile_phase(stats::CompilePhase::link, 100'000);
  stats::count_kernel_compiled("add_1", "", 2'500'000);
  stats::count_kernel_compiled("add_1", "[=4]", 500'000);  // its phases start from zero
  stats::count_kernel_launches(3, 2);
  stats::count_memory_lookup(true);
  stats::count_memory_lookup(false);
  stats::count_disk_hit(1'000'000);
  stats::count_disk_miss();
  stats::count_disk_rejected();
  stats::count_specialization_failed();
  stats::count_bucket_over_limit();
  {
    cpu_allocator().trim();  // nothing cached: the next allocation goes to the system
    const Tensor t = Tensor::empty({3, 1000, 1003}, DType::f32);
    s = engine_stats();
    CHECK(s.peak_bytes >= t.nbytes());
  }
  CHECK(s.kernels_compiled == 2);
  CHECK(s.specialized_compiled == 1);
  CHECK(s.compile_ms == Approx(3.0));
  const std::vector<KernelCompileRecord> log = kernel_compile_log();
  REQUIRE(log.size() == 2);
  CHECK(log[0].name == "add_1");
  CHECK(log[0].bucket.empty());
  CHECK(log[0].ms == Approx(2.5));
  CHECK(log[0].optimize_ms == Approx(0.4));
  CHECK(log[0].codegen_ms == Approx(1.6));
  CHECK(log[0].link_ms == Approx(0.1));
  CHECK(log[0].lower_ms == Approx(0.4));  // the rest
  CHECK(log[1].bucket == "[=4]");
  CHECK(log[1].codegen_ms == 0);
  CHECK(log[1].lower_ms == Approx(0.5));
  CHECK(s.kernel_launches == 3);
  CHECK(s.call_site_hits == 2);
  CHECK(s.memory_hits == 1);
  CHECK(s.memory_misses == 1);
  CHECK(s.disk_hits == 1);
  CHECK(s.disk_load_ms == Approx(1.0));
  CHECK(s.disk_misses == 1);
  CHECK(s.disk_rejected == 1);
  CHECK(s.specializations_failed == 1);
  CHECK(s.buckets_over_limit == 1);
  CHECK(s.system_allocations >= 1);

  reset_engine_stats();
  s = engine_stats();
  CHECK(s.kernels_compiled == 0);
  CHECK(kernel_compile_log().empty());
  CHECK(s.kernel_launches == 0);
  CHECK(s.call_site_hits == 0);
  CHECK(s.memory_hits + s.memory_misses + s.disk_hits + s.disk_misses + s.disk_rejected == 0);
  CHECK(s.specializations_failed + s.buckets_over_limit + s.specialized_compiled == 0);
  CHECK(s.system_allocations == 0);
  CHECK(s.peak_bytes == cpu_allocator().stats().live_bytes);
}
