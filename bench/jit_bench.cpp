// JIT/compile: what the JIT costs per kernel, over the kernels of W1, W2 and
// W3 (bench/nimble_workloads.hpp, at their smallest sizes: L = 1, n = 8,
// L = 16). One iteration: empty the process's KernelCache, reset the engine
// stats, then for each workload nimble::compile its module and run it once on
// a vm::VirtualMachine (kernels compile on first use), and read
// kernel_compile_log(). Counters over all its records: kernels, ms_median,
// ms_p90, ms_max and ms_total (milliseconds per kernel, from primitive source
// to callable code), and pct_lower, pct_optimize, pct_codegen, pct_link: the
// share of ms_total in each phase (KernelCompileRecord). The row's time is
// the whole iteration (compiling and the three runs); the counters are what
// it measures. On the reference kernels (no JIT registered) nothing is
// compiled: kernels = 0 and the ms counters 0.
// NIMBLE_JIT_BENCH_RECORDS=1 lists each kernel's record (name, bucket, phases) on stderr.
// Synchronous specialization and no disk cache, so that every kernel is
// compiled inside the iteration.
//
// JIT/new_bucket/<W>: the first call on a new shape bucket while generic
// kernels exist (tiered: the specialized ones compile in the background),
// over the steady-state latency at that shape (the median of 5 calls once
// the background compilations are done). Warmed up at the smallest size,
// then each larger size is a new bucket; counters ratio_to_steady (the
// median over those sizes) and ratio_max.
//
// JIT/specialized/<W>/<size>: the same model at one size with generic kernels
// only (BucketPolicy::max_specialized_per_function = 0) and with specialized
// ones: counters generic_ms, specialized_ms (medians of 5 calls) and speedup.
//
// JIT/start: a fresh process (nimble_start_probe, beside this program) to
// its first W3 L = 128 result, with an empty disk cache (cold) and again with
// what the first left there (warm): counters cold_compile_ms, cold_first_ms,
// warm_kernels_compiled, warm_compile_ms, warm_first_ms, cache_load_ms and
// load_pct (cache_load_ms over cold_compile_ms, in percent).
//
// One thread (nimble::set_num_threads(1)), as elemwise_bench.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <sstream>
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

// Sets the process's KernelCache options for one benchmark and restores them.
class ScopedCacheOptions {
 public:
  explicit ScopedCacheOptions(bool background, std::uint32_t limit = 8)
      : saved_(KernelCache::global().options()) {
    KernelCacheOptions o = saved_;
    o.background = background;
    o.buckets.max_specialized_per_function = limit;
    o.disk_cache_dir.clear();
    KernelCache::global().configure(o);
  }
  ~ScopedCacheOptions() { KernelCache::global().configure(saved_); }
  ScopedCacheOptions(const ScopedCacheOptions&) = delete;
  ScopedCacheOptions& operator=(const ScopedCacheOptions&) = delete;

 private:
  KernelCacheOptions saved_;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// A model compiled once, run at any size.
struct Model {
  ir::Module module;
  std::string entry;
  std::vector<Value> (*args)(const ir::Module&, std::int64_t);
};

Model make_model(BuildFn build, std::vector<Value> (*args)(const ir::Module&, std::int64_t)) {
  Builder b;
  const Function entry = build(b);
  return {b.build(), entry.name(), args};
}

Model model(std::string_view workload) {
  if (workload == "W1")
    return make_model(models::build_lstm, [](const ir::Module&, std::int64_t n) { return w1_args(n); });
  if (workload == "W2") return make_model(models::build_tree_lstm, w2_args);
  return make_model(models::build_bert, w3_args);
}

double time_call(vm::VirtualMachine& machine, const Model& m, const std::vector<Value>& args) {
  const auto start = std::chrono::steady_clock::now();
  const Value out = machine.invoke(m.entry, args);
  benchmark::DoNotOptimize(&out);
  return ms_since(start);
}

double steady_ms(vm::VirtualMachine& machine, const Model& m, const std::vector<Value>& args) {
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) ms.push_back(time_call(machine, m, args));
  return percentile(ms, 0.5);
}

void new_bucket(benchmark::State& state, std::string_view workload, std::vector<std::int64_t> sizes) {
  try {
    const ScopedCacheOptions scope(true);
    const Model m = model(workload);
    std::vector<double> ratios;
    for (auto _ : state) {
      vm::VirtualMachine machine(compile(m.module));
      // Generic kernels (and the first size's specialized ones) exist.
      (void)time_call(machine, m, m.args(m.module, sizes[0]));
      KernelCache::global().wait_for_background();
      for (std::size_t i = 1; i < sizes.size(); ++i) {
        const std::vector<Value> args = m.args(m.module, sizes[i]);
        const double first = time_call(machine, m, args);
        KernelCache::global().wait_for_background();
        (void)time_call(machine, m, args);  // warm the allocator's pools for this size
        ratios.push_back(first / steady_ms(machine, m, args));
      }
    }
    state.counters["ratio_to_steady"] = percentile(ratios, 0.5);
    state.counters["ratio_max"] = ratios.empty() ? 0 : *std::max_element(ratios.begin(), ratios.end());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_bench: JIT/new_bucket/%s: %s\n", std::string(workload).c_str(), e.what());
    ++failures;
    state.SkipWithError(e.what());
  }
}

void specialized(benchmark::State& state, std::string_view workload, std::int64_t size) {
  try {
    const Model m = model(workload);
    const std::vector<Value> args = m.args(m.module, size);
    double generic = 0;
    double special = 0;
    for (auto _ : state) {
      {
        const ScopedCacheOptions scope(false, 0);
        vm::VirtualMachine machine(compile(m.module));
        (void)time_call(machine, m, args);
        generic = steady_ms(machine, m, args);
      }
      {
        const ScopedCacheOptions scope(false);
        vm::VirtualMachine machine(compile(m.module));
        (void)time_call(machine, m, args);
        special = steady_ms(machine, m, args);
      }
    }
    state.counters["generic_ms"] = generic;
    state.counters["specialized_ms"] = special;
    state.counters["speedup"] = special > 0 ? generic / special : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_bench: JIT/specialized/%s: %s\n", std::string(workload).c_str(), e.what());
    ++failures;
    state.SkipWithError(e.what());
  }
}

// Runs nimble_start_probe on `cache_dir`; its key=value pairs.
std::map<std::string, double> run_probe(const std::string& probe, const std::string& cache_dir) {
  const std::string command = "'" + probe + "' '" + cache_dir + "'";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + probe);
  std::string line(4096, '\0');
  const bool got = std::fgets(line.data(), static_cast<int>(line.size()), pipe) != nullptr;
  if (::pclose(pipe) != 0 || !got) throw std::runtime_error(probe + " failed");
  std::map<std::string, double> values;
  std::istringstream in(line.c_str());
  std::string pair;
  while (in >> pair)
    if (const auto eq = pair.find('='); eq != std::string::npos)
      values[pair.substr(0, eq)] = std::stod(pair.substr(eq + 1));
  return values;
}

void start(benchmark::State& state) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("nimble_start_bench_" + std::to_string(::getpid()));
  try {
    const std::string probe =
        (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "nimble_start_probe").string();
    std::map<std::string, double> cold;
    std::map<std::string, double> warm;
    for (auto _ : state) {
      std::filesystem::remove_all(dir);
      cold = run_probe(probe, dir.string());
      warm = run_probe(probe, dir.string());
    }
    auto& c = state.counters;
    c["cold_compile_ms"] = cold["compile_ms"];
    c["cold_kernels_compiled"] = cold["kernels_compiled"];
    c["cold_first_ms"] = cold["first_result_ms"];
    c["warm_kernels_compiled"] = warm["kernels_compiled"];
    c["warm_compile_ms"] = warm["compile_ms"];
    c["warm_first_ms"] = warm["first_result_ms"];
    c["cache_load_ms"] = warm["disk_load_ms"];
    c["load_pct"] = cold["compile_ms"] > 0 ? 100 * warm["disk_load_ms"] / cold["compile_ms"] : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_bench: JIT/start: %s\n", e.what());
    ++failures;
    state.SkipWithError(e.what());
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

void jit_compile(benchmark::State& state) {
  try {
    const ScopedCacheOptions scope(false);
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
    double total = 0;
    std::array<double, 4> phases{};  // lower, optimize, codegen, link
    // NIMBLE_JIT_BENCH_RECORDS=1 lists every kernel's record on stderr.
    const char* const list = std::getenv("NIMBLE_JIT_BENCH_RECORDS");
    const bool listing = list != nullptr && *list != '\0' && *list != '0';
    for (const KernelCompileRecord& r : kernel_compile_log()) {
      if (listing)
        std::fprintf(stderr, "%-28s %-34s %7.2f ms  lower %5.2f  optimize %5.2f  codegen %6.2f  link %4.2f\n",
                     r.name.c_str(), r.bucket.empty() ? "generic" : r.bucket.c_str(), r.ms, r.lower_ms,
                     r.optimize_ms, r.codegen_ms, r.link_ms);
      ms.push_back(r.ms);
      total += r.ms;
      phases[0] += r.lower_ms;
      phases[1] += r.optimize_ms;
      phases[2] += r.codegen_ms;
      phases[3] += r.link_ms;
    }
    auto& c = state.counters;
    c["kernels"] = static_cast<double>(ms.size());
    c["ms_median"] = percentile(ms, 0.5);
    c["ms_p90"] = percentile(ms, 0.9);
    c["ms_max"] = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
    c["ms_total"] = total;
    // Where the time went, in percent of ms_total.
    const auto share = [&](double part) { return total > 0 ? 100 * part / total : 0; };
    c["pct_lower"] = share(phases[0]);
    c["pct_optimize"] = share(phases[1]);
    c["pct_codegen"] = share(phases[2]);
    c["pct_link"] = share(phases[3]);
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
  using nimble::bench::new_bucket;
  using nimble::bench::specialized;
  benchmark::RegisterBenchmark("JIT/new_bucket/W1", [](benchmark::State& s) { new_bucket(s, "W1", {8, 37, 64, 128}); })
      ->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("JIT/new_bucket/W3", [](benchmark::State& s) { new_bucket(s, "W3", {16, 37, 100, 128, 200}); })
      ->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond);
  for (const auto& [workload, size] : std::vector<std::pair<const char*, std::int64_t>>{
           {"W1", 37}, {"W2", 50}, {"W3", 16}, {"W3", 37}, {"W3", 128}, {"W3", 200}})
    benchmark::RegisterBenchmark(("JIT/specialized/" + std::string(workload) + "/" + std::to_string(size)).c_str(),
                                 [workload = std::string(workload), size = size](benchmark::State& s) {
                                   specialized(s, workload, size);
                                 })
        ->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("JIT/start", nimble::bench::start)
      ->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return nimble::bench::failures == 0 ? 0 : 1;
}
