// GPU launches run on the host, for the [cuda] tests on the fake driver
// (test/cuda/fake_driver.cpp): a launched entry <prefix>_stage<k> runs stage
// k of the same kernel IR with the GPU's schedule compiled for the host
// (codegen::gpu_schedule_host_code) — what the GPU would compute, on the
// fake's device memory, which is host memory.
#pragma once

#include <string>

#include "codegen/llvm/host_code.hpp"
#include "nimble/runtime/allocator.hpp"
#include "support/fake_cuda.hpp"

namespace nimble::testing {

/// Registers `host` as the code of the entries <prefix>_stage<k>.
void add_host_stages(const std::string& prefix, codegen::HostCode host);

/// The fake driver's launch hook: runs the launched entry's stage on the
/// host over the launch's iterations, its failure code into the status word.
int run_launch_on_host(const char* entry, void** params, const unsigned* grid, const unsigned* block);

/// While it lives, every launch on `fake` runs on the host, and every GPU
/// kernel the process's KernelCache builds, generic or specialized, gets its
/// host stages (a provider asked before the JIT compiles them from the same
/// primitive, under the JIT's entry names, then serves the JIT's kernel). Clears the KernelCache when made and
/// when destroyed (its GPU kernels hold the fake's modules).
class GpuOnHost {
 public:
  explicit GpuOnHost(const FakeDriver& fake, unsigned threads = 3);
  ~GpuOnHost();
  GpuOnHost(const GpuOnHost&) = delete;
  GpuOnHost& operator=(const GpuOnHost&) = delete;

 private:
  const FakeDriver& fake_;
};

/// `allocator` is allocator_for(its device) while this lives.
class Registered {
 public:
  explicit Registered(Allocator& allocator) : device_(allocator.device()) { register_allocator(allocator); }
  ~Registered() { unregister_allocator(device_); }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;

 private:
  Device device_;
};

}  // namespace nimble::testing
