// The fake CUDA driver (test/cuda/fake_driver.cpp) as the [cuda] tests
// drive it: its controls, resolved from the library nimble opens (dlopen
// hands out the same one).
#pragma once

#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>

#include "cuda/fake_driver.hpp"
#include "runtime/cuda/driver.hpp"

namespace nimble::testing {


/// The fake driver library: $NIMBLE_TEST_FAKE_CUDA_DRIVER where set (a
/// bundle of script/gpu-check, moved to another machine), else the build's.
inline const char* fake_driver_path() {
  const char* path = std::getenv("NIMBLE_TEST_FAKE_CUDA_DRIVER");
  return path != nullptr && *path != '\0' ? path : NIMBLE_FAKE_CUDA_DRIVER;
}

// The fake driver's controls, from the library nimble opens (dlopen hands
// out the same one).
class FakeDriver {
 public:
  explicit FakeDriver(int devices = 1, unsigned long long memory = 1 << 20, int compute_capability = 90)
      : handle_(::dlopen(fake_driver_path(), RTLD_NOW | RTLD_LOCAL)) {
    REQUIRE(handle_ != nullptr);
    get("fake_cuda_configure", configure_);
    get("fake_cuda_fail_next", fail_next_);
    get("fake_cuda_calls", calls_);
    get("fake_cuda_live_allocations", live_allocations_);
    get("fake_cuda_live_modules", live_modules_);
    get("fake_cuda_live_streams", live_streams_);
    get("fake_cuda_retained_contexts", retained_);
    get("fake_cuda_launch_count", launch_count_);
    get("fake_cuda_launch", launch_);
    get("fake_cuda_set_launch_hook", set_hook_);
    configure_(devices, memory, compute_capability);
  }
  ~FakeDriver() {
    set_hook_(nullptr);
    ::dlclose(handle_);
  }
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;

  std::shared_ptr<const cuda::Driver> open() const { return cuda::Driver::open(fake_driver_path()); }
  void fail_next(const char* call, int result) const { fail_next_(call, result); }
  using LaunchHook = int (*)(const char* entry, void** params, const unsigned* grid, const unsigned* block);
  /// Runs every launch with `hook` too (the fake's stand-in for the GPU).
  void set_launch_hook(LaunchHook hook) const { set_hook_(hook); }
  int calls(const char* call) const { return calls_(call); }
  int live_allocations() const { return live_allocations_(); }
  int live_modules() const { return live_modules_(); }
  int live_streams() const { return live_streams_(); }
  int retained_contexts() const { return retained_(); }
  int launch_count() const { return launch_count_(); }
  FakeLaunch launch(int i) const {
    FakeLaunch l{};
    REQUIRE(launch_(i, &l));
    return l;
  }
  // Every driver object nimble made has been given back.
  void check_nothing_live() const {
    CHECK(live_allocations() == 0);
    CHECK(live_modules() == 0);
    CHECK(live_streams() == 0);
    CHECK(retained_contexts() == 0);
  }

 private:
  template <class Fn>
  void get(const char* name, Fn*& fn) {
    fn = reinterpret_cast<Fn*>(::dlsym(handle_, name));
    REQUIRE(fn != nullptr);
  }
  void* handle_;
  void (*configure_)(int, unsigned long long, int) = nullptr;
  void (*fail_next_)(const char*, int) = nullptr;
  int (*calls_)(const char*) = nullptr;
  int (*live_allocations_)() = nullptr;
  int (*live_modules_)() = nullptr;
  int (*live_streams_)() = nullptr;
  int (*retained_)() = nullptr;
  int (*launch_count_)() = nullptr;
  bool (*launch_)(int, FakeLaunch*) = nullptr;
  void (*set_hook_)(LaunchHook) = nullptr;
};

}  // namespace nimble::testing
