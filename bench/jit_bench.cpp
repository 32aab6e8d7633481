// JIT/compile: what the JIT costs per kernel, over the kernels of W1, W2 and
// W3 (bench/nimble_workloads.hpp, at their smallest sizes: L = 1, n = 8,
// L = 16). One iteration: empty the process's KernelCache, reset the engine
// stats, then for each workload nimble::compile its module and run it once on
// a vm::VirtualMachine (kernels compile on first use), and read
// kernel_compile_log(). Counters over all its records: kernels, ms_median,
// ms_p90, ms_max and ms_total (milliseconds per kernel, from primitive source
// to callable code). The row's time is the whole iteration (compiling and the
// three runs); the counters are what it measures. On the reference kernels
// (no JIT registered) nothing is compiled: kernels = 0 and the ms counters 0.
// One thread (nimble::set_num_threads(1)), as elemwise_bench.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <nimble/nimble.hpp>

#include "engine.hpp"
#include "harness.hpp"
#include "nimble_workloads.hpp"

namespace nimble::bench {
namespace {

int failures = 0;

// A workload's module and arguments, ready to compile and run.
struct Workload {
  ir::Module module;
  std::string entry;
  std::vector<Value> args;
};

Workload make_workload(BuildFn build, std::vector<Value> (*args)(const ir::Module&)) {
  Builder b;
  const Function entry = build(b);
  ir::Module module = b.build();
  std::vector<Value> values = args(module);
  return {std::move(module), entry.name(), std::move(values)};
}

std::vector<Workload> workloads_to_compile() {
  std::vector<Workload> all;
  all.push_back(make_workload(models::build_lstm, [](const ir::Module&) {
    return w1_args(workloads::kW1Sizes[0]);
  }));
  all.push_back(make_workload(models::build_tree_lstm, [](const ir::Module& m) {
    return w2_args(m, workloads::kW2Sizes[0]);
  }));
  all.push_back(make_workload(models::build_bert, [](const ir::Module& m) {
    return w3_args(m, workloads::kW3Sizes[0]);
  }));
  return all;
}

void jit_compile(benchmark::State& state) {
  try {
    const std::vector<Workload> all = workloads_to_compile();  // not timed: data and IR
    for (auto _ : state) {
      KernelCache::global().clear();
      reset_engine_stats();
      for (const Workload& w : all) {
        vm::VirtualMachine machine(compile(w.module));
        const Value out = machine.invoke(w.entry, w.args);
        benchmark::DoNotOptimize(&out);
      }
    }
    std::vector<double> ms;
    for (const KernelCompileRecord& r : kernel_compile_log()) ms.push_back(r.ms);
    double total = 0;
    for (double m : ms) total += m;
    auto& c = state.counters;
    c["kernels"] = static_cast<double>(ms.size());
    c["ms_median"] = percentile(ms, 0.5);
    c["ms_p90"] = percentile(ms, 0.9);
    c["ms_max"] = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
    c["ms_total"] = total;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_bench: JIT/compile: %s\n", e.what());
    ++failures;
    state.SkipWithError(e.what());
  }
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  nimble::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("threads", "1");
  benchmark::AddCustomContext("nimble_version", nimble::kVersion);
  benchmark::AddCustomContext("nimble_engine", nimble::bench::kNimbleEngineDescription);
  // One iteration and one repetition, whatever --benchmark_repetitions says:
  // each would compile everything again, and the log's records already give
  // the distribution.
  benchmark::RegisterBenchmark("JIT/compile", nimble::bench::jit_compile)
      ->Iterations(1)
      ->Repetitions(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return nimble::bench::failures == 0 ? 0 : 1;
}
