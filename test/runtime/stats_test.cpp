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

  stats::count_kernel_compiled("add_1", 2'500'000);
  stats::count_kernel_launches(3);
  {
    cpu_allocator().trim();  // nothing cached: the next allocation goes to the system
    const Tensor t = Tensor::empty({3, 1000, 1003}, DType::f32);
    s = engine_stats();
    CHECK(s.peak_bytes >= t.nbytes());
  }
  CHECK(s.kernels_compiled == 1);
  CHECK(s.compile_ms == Approx(2.5));
  const std::vector<KernelCompileRecord> log = kernel_compile_log();
  REQUIRE(log.size() == 1);
  CHECK(log[0].name == "add_1");
  CHECK(log[0].ms == Approx(2.5));
  CHECK(s.kernel_launches == 3);
  CHECK(s.system_allocations >= 1);

  reset_engine_stats();
  s = engine_stats();
  CHECK(s.kernels_compiled == 0);
  CHECK(kernel_compile_log().empty());
  CHECK(s.kernel_launches == 0);
  CHECK(s.system_allocations == 0);
  CHECK(s.peak_bytes == cpu_allocator().stats().live_bytes);
}
