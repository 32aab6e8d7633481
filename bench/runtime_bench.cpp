// The runtime's allocation paths, against the system allocator in the same
// run. Names follow <workload>/<impl>/<size>/t<threads>; report medians
// (--benchmark_repetitions=N --benchmark_report_aggregates_only=true).
#include <benchmark/benchmark.h>

#include <new>

#include <nimble/runtime.hpp>

namespace {

void alloc_pooled(benchmark::State& state) {
  auto& alloc = nimble::cpu_allocator();
  const auto n = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = alloc.allocate(n);
    benchmark::DoNotOptimize(p);
    alloc.deallocate(p, n);
  }
}

void alloc_system(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = ::operator new(n, std::align_val_t{64});
    benchmark::DoNotOptimize(p);
    ::operator delete(p, std::align_val_t{64});
  }
}

// A VM-style tensor allocation: a fresh [L, 512] f32 output each call.
void tensor_empty(benchmark::State& state) {
  const std::int64_t rows = state.range(0);
  for (auto _ : state) {
    nimble::Tensor t = nimble::Tensor::empty({rows, 512}, nimble::DType::f32);
    benchmark::DoNotOptimize(t.storage().get());
  }
}

}  // namespace

BENCHMARK(alloc_pooled)->Name("Alloc/nimble_pool/4096/t1")->Arg(4096);
BENCHMARK(alloc_system)->Name("Alloc/system_aligned_new/4096/t1")->Arg(4096);
BENCHMARK(alloc_pooled)->Name("Alloc/nimble_pool/4194304/t1")->Arg(4 << 20);
BENCHMARK(alloc_system)->Name("Alloc/system_aligned_new/4194304/t1")->Arg(4 << 20);
BENCHMARK(tensor_empty)->Name("TensorEmpty/nimble/64x512/t1")->Arg(64);

BENCHMARK_MAIN();
