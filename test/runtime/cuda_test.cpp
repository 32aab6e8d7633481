// The CUDA driver layer (lib/runtime/cuda/): against the fake driver
// (test/cuda/fake_driver.cpp) everywhere, and on a real GPU where the
// machine has one (those cases say why they skip otherwise).
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nimble/error.hpp"
#include "runtime/cuda/allocator.hpp"
#include "runtime/cuda/context.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/module.hpp"
#include "runtime/cuda/stream.hpp"
#include "support/fake_cuda.hpp"
#include "support/ptxas.hpp"

namespace nimble {
namespace {

using testing::FakeDriver;

using cuda::Context;
using cuda::DeviceAllocator;
using cuda::Driver;
using cuda::LaunchConfig;
using cuda::Module;
using cuda::Stream;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// $NIMBLE_TEST_DATA_DIR where set (a bundle of script/gpu-check), else the source tree's.
std::string add_one_ptx() {
  const char* dir = std::getenv("NIMBLE_TEST_DATA_DIR");
  return read_file(std::filesystem::path(dir != nullptr && *dir != '\0' ? dir : NIMBLE_TEST_DATA_DIR) / "cuda" /
                   "add_one.ptx");
}

TEST_CASE("cuda: no driver library, or one without the driver's functions, is a not_supported Error naming it",
          "[cuda]") {
  try {
    (void)Driver::open("/nonexistent/libcuda.so.1");
    FAIL("expected an Error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::not_supported);
    CHECK_THAT(e.what(), Catch::Contains("no CUDA driver") && Catch::Contains("/nonexistent/libcuda.so.1"));
  }
  // A real library that is not a CUDA driver.
  try {
    (void)Driver::open("libm.so.6");
    FAIL("expected an Error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::not_supported);
    CHECK_THAT(e.what(), Catch::Contains("libm.so.6") && Catch::Contains("has no cuGetErrorName"));
  }
}

TEST_CASE("cuda: a driver that cannot start, and a machine with no device, are Errors that say so", "[cuda]") {
  const FakeDriver fake(/*devices=*/0);
  fake.fail_next("cuInit", cuda::kErrorNoDevice);
  try {
    (void)fake.open();
    FAIL("expected an Error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::not_supported);
    CHECK_THAT(e.what(), Catch::Contains("cuInit failed") && Catch::Contains("CUDA_ERROR_NO_DEVICE"));
  }
  const auto driver = fake.open();
  CHECK(driver->version() == 12040);
  CHECK_THROWS_WITH(Context::open(driver, 0), Catch::Contains("no CUDA device"));
  fake.check_nothing_live();
}

TEST_CASE("cuda: a device's primary context is retained while used, with the device's properties", "[cuda]") {
  const FakeDriver fake(/*devices=*/2, 1 << 20, /*compute_capability=*/80);
  const auto driver = fake.open();
  CHECK_THROWS_WITH(Context::open(driver, 2), Catch::Contains("cuda:2") && Catch::Contains("sees 2"));
  CHECK_THROWS_WITH(Context::open(driver, -1), Catch::Contains("cuda:-1"));
  {
    const auto context = Context::open(driver, 1);
    CHECK(fake.retained_contexts() == 1);
    CHECK(context->name() == "Fake GPU 1");
    CHECK(context->compute_capability() == 80);
    CHECK(context->multiprocessors() == 132);
    CHECK(context->max_threads_per_block() == 1024);
    CHECK(context->total_memory() == (1 << 20));
    // A failing driver call names itself and the driver's error.
    fake.fail_next("cuCtxSetCurrent", 201);
    CHECK_THROWS_WITH(context->make_current(),
                      Catch::Contains("cuCtxSetCurrent failed") && Catch::Contains("CUDA_ERROR_INVALID_CONTEXT"));
  }
  fake.check_nothing_live();
}

TEST_CASE("cuda: device memory is pooled by size class, and running out of it is an Error", "[cuda]") {
  const FakeDriver fake(1, /*memory=*/1 << 20);
  {
    const auto context = Context::open(fake.open(), 0);
    DeviceAllocator allocator(context);
    CHECK(allocator.device() == Device::cuda(0));
    CHECK_FALSE(allocator.host_accessible());
    CHECK(allocator.allocate(0) == nullptr);

    void* a = allocator.allocate(1000);
    REQUIRE(a != nullptr);
    CHECK(fake.live_allocations() == 1);
    allocator.deallocate(a, 1000);
    void* b = allocator.allocate(900);  // the same size class (1024 bytes)
    CHECK(b == a);
    AllocatorStats s = allocator.stats();
    CHECK(s.allocations == 2);
    CHECK(s.pool_hits == 1);
    CHECK(s.system_allocations == 1);
    CHECK(s.live_bytes == 900);
    CHECK(fake.calls("cuMemAlloc_v2") == 1);
    allocator.deallocate(b, 900);

    // 600 KiB live: another 600 KiB does not fit in 1 MiB.
    void* big = allocator.allocate(600 << 10);
    try {
      (void)allocator.allocate(600 << 10);
      FAIL("expected an Error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::resource_exhausted);
      CHECK_THAT(e.what(), Catch::Contains("out of device memory") && Catch::Contains("cuda:0") &&
                               Catch::Contains(std::to_string(PooledCpuAllocator::size_class_bytes(600 << 10))));
    }
    CHECK(allocator.stats().live_bytes == (600 << 10));
    // Freed but cached, then asked for in another size class: the pool goes
    // back to the driver and the allocation is tried again.
    allocator.deallocate(big, 600 << 10);
    void* other = allocator.allocate(700 << 10);
    CHECK(other != nullptr);
    CHECK(allocator.stats().system_frees >= 1);
    allocator.deallocate(other, 700 << 10);

    fake.fail_next("cuMemAlloc_v2", cuda::kErrorInvalidValue);
    CHECK_THROWS_WITH(allocator.allocate(5000),
                      Catch::Contains("cuMemAlloc_v2 failed") && Catch::Contains("CUDA_ERROR_INVALID_VALUE"));
  }
  fake.check_nothing_live();
}

TEST_CASE("cuda: copies between host and device round-trip, and a copy past an allocation fails", "[cuda]") {
  const FakeDriver fake;
  {
    const auto context = Context::open(fake.open(), 0);
    DeviceAllocator allocator(context);
    Stream stream(context);
    CHECK(fake.live_streams() == 1);
    std::vector<float> in(1000), out(1000, -1.0f);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
    const std::size_t bytes = in.size() * sizeof(float);
    void* x = allocator.allocate(bytes);
    void* y = allocator.allocate(bytes);
    stream.copy_to_device(x, in.data(), bytes);
    stream.copy_on_device(y, x, bytes);
    stream.copy_to_host(out.data(), y, bytes);
    CHECK(out == in);
    // Nothing is copied for 0 bytes (the driver is not called).
    const int calls = fake.calls("cuMemcpyHtoDAsync_v2");
    stream.copy_to_device(x, in.data(), 0);
    CHECK(fake.calls("cuMemcpyHtoDAsync_v2") == calls);
    // The pool rounds 4000 bytes up to 4096: the block's end is past them.
    std::vector<float> large(2000);
    CHECK_THROWS_WITH(stream.copy_to_device(x, large.data(), 8000),
                      Catch::Contains("cuMemcpyHtoDAsync_v2 failed") && Catch::Contains("CUDA_ERROR_INVALID_VALUE"));
    stream.synchronize();
    allocator.deallocate(x, bytes);
    allocator.deallocate(y, bytes);
  }
  fake.check_nothing_live();
}

TEST_CASE("cuda: PTX loads into a module whose kernels launch with the grid, block and arguments given", "[cuda]") {
  const FakeDriver fake;
  {
    const auto context = Context::open(fake.open(), 0);
    Stream stream(context);
    const Module module(context, add_one_ptx(), "add_one.ptx");
    CHECK(fake.live_modules() == 1);
    {
      const cuda::CUfunction kernel = module.function("add_one");
      unsigned long long data = 0x7000'0000'1000ULL;
      unsigned n = 1000;
      void* args[] = {&data, &n};
      stream.launch(kernel, {.grid = {4, 1, 1}, .block = {256, 1, 1}, .shared_bytes = 64}, args, "add_one");
      REQUIRE(fake.launch_count() == 1);
      const FakeLaunch l = fake.launch(0);
      CHECK(std::string(l.entry) == "add_one");
      CHECK((l.grid[0] == 4 && l.grid[1] == 1 && l.grid[2] == 1));
      CHECK((l.block[0] == 256 && l.block[1] == 1 && l.block[2] == 1));
      CHECK(l.shared_bytes == 64);
      CHECK(l.stream != nullptr);  // the VM's stream, not the legacy default one
      REQUIRE(l.num_params == 2);
      CHECK(l.params[0] == data);
      CHECK(l.params[1] == n);

      // Checked before the driver sees it: nothing launched.
      CHECK_THROWS_WITH(stream.launch(kernel, {.grid = {1, 1, 1}, .block = {2048, 1, 1}}, args, "add_one"),
                        Catch::Contains("add_one") && Catch::Contains("at most 1024 threads") &&
                            Catch::Contains("block 2048x1x1"));
      CHECK_THROWS_WITH(stream.launch(kernel, {.grid = {0, 1, 1}, .block = {32, 1, 1}}, args, "add_one"),
                        Catch::Contains("grid 0x1x1"));
      CHECK(fake.launch_count() == 1);
      fake.fail_next("cuLaunchKernel", 1);
      CHECK_THROWS_WITH(stream.launch(kernel, {}, args, "add_one"),
                        Catch::Contains("cuLaunchKernel failed for add_one") &&
                            Catch::Contains("CUDA_ERROR_INVALID_VALUE"));
    }
    CHECK_THROWS_WITH(module.function("add_two"),
                      Catch::Contains("add_one.ptx has no kernel add_two") && Catch::Contains("CUDA_ERROR_NOT_FOUND"));
  }
  fake.check_nothing_live();
}

TEST_CASE("cuda: PTX the driver rejects is an Error carrying the driver's JIT log", "[cuda]") {
  const FakeDriver fake;
  {
    const auto context = Context::open(fake.open(), 0);
    try {
      const Module module(context, ".target sm_90\n.entry k() { ret; }\n", "broken.ptx");
      FAIL("expected an Error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::runtime_error);
      CHECK_THAT(e.what(), Catch::Contains("cuModuleLoadDataEx failed for broken.ptx on cuda:0 (sm_90)") &&
                               Catch::Contains("CUDA_ERROR_INVALID_PTX") &&
                               Catch::Contains("Missing .version directive"));
    }
  }
  fake.check_nothing_live();
}

TEST_CASE("cuda: the tests' PTX passes ptxas for sm_80 and sm_90, and the PTX the fake rejects fails it", "[cuda]") {
  const std::string ptxas = testing::find_ptxas();
  if (ptxas.empty()) {
    WARN("skipped: no ptxas (the CUDA toolkit is not installed)");
    return;
  }
  CHECK(testing::run_ptxas(ptxas, add_one_ptx(), "sm_80").status == 0);
  CHECK(testing::run_ptxas(ptxas, add_one_ptx(), "sm_90").status == 0);
  const testing::PtxasResult broken = testing::run_ptxas(ptxas, ".target sm_90\n.entry k() { ret; }\n", "sm_90");
  CHECK(broken.status != 0);
  CHECK_THAT(broken.log, Catch::Contains(".version"));
}

TEST_CASE("cuda: on a GPU, a PTX kernel runs on data copied to the device and back", "[cuda]") {
  std::shared_ptr<const Driver> driver;
  std::shared_ptr<const Context> context;
  try {
    driver = cuda::process_driver();
    context = Context::open(driver, 0);
  } catch (const Error& e) {
    WARN("skipped: " << e.what());
    return;
  }
  DeviceAllocator allocator(context);
  Stream stream(context);
  const Module module(context, add_one_ptx(), "add_one.ptx");
  const unsigned n = 100'003;
  std::vector<float> in(n), out(n);
  for (unsigned i = 0; i < n; ++i) in[i] = static_cast<float>(i % 977) - 300.0f;
  void* x = allocator.allocate(n * sizeof(float));
  stream.copy_to_device(x, in.data(), n * sizeof(float));
  unsigned long long address = reinterpret_cast<std::uintptr_t>(x);
  unsigned count = n;
  void* args[] = {&address, &count};
  stream.launch(module.function("add_one"), {.grid = {(n + 255) / 256, 1, 1}, .block = {256, 1, 1}}, args, "add_one");
  stream.copy_to_host(out.data(), x, n * sizeof(float));
  for (unsigned i = 0; i < n; ++i) REQUIRE(out[i] == in[i] + 1.0f);
  allocator.deallocate(x, n * sizeof(float));
}

}  // namespace
}  // namespace nimble
