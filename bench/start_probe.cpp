// nimble_start_probe <cache dir>: one process start as a user's program sees
// it — build W3 (BERT), compile it, run it once at L = 128 — with the disk
// cache in <cache dir>, then wait for the kernels specializing in the
// background (so that the disk cache holds them for the next process).
// Prints one line of key=value pairs for JIT/start (bench/jit_bench.cpp):
//   first_result_ms  from process start of this work to the first result
//   kernels_compiled specialized_compiled compile_ms disk_hits disk_load_ms
//   specializations_failed                 EngineStats after the wait
#include <chrono>
#include <cstdio>
#include <exception>

#include <nimble/nimble.hpp>
#include <nimble/runtime/kernel.hpp>

#include "nimble_workloads.hpp"

int main(int argc, char** argv) {
  using namespace nimble;
  if (argc != 2) {
    std::fprintf(stderr, "usage: nimble_start_probe <cache dir>\n");
    return 2;
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    set_num_threads(1);
    KernelCacheOptions options = KernelCache::global().options();
    options.disk_cache_dir = argv[1];
    KernelCache::global().configure(options);
    reset_engine_stats();
    Builder b;
    const Function entry = models::build_bert(b);
    const ir::Module module = b.build();
    vm::VirtualMachine machine(compile(module));
    const Value out = machine.invoke(entry.name(), bench::w3_args(module, 128));
    const double first_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    KernelCache::global().wait_for_background();
    const EngineStats s = engine_stats();
    std::printf("first_result_ms=%.3f kernels_compiled=%llu specialized_compiled=%llu compile_ms=%.3f "
                "disk_hits=%llu disk_load_ms=%.3f specializations_failed=%llu rank=%zu\n",
                first_ms, static_cast<unsigned long long>(s.kernels_compiled),
                static_cast<unsigned long long>(s.specialized_compiled), s.compile_ms,
                static_cast<unsigned long long>(s.disk_hits), s.disk_load_ms,
                static_cast<unsigned long long>(s.specializations_failed), out.tensor().rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nimble_start_probe: %s\n", e.what());
    return 1;
  }
}
