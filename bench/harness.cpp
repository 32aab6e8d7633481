#include "harness.hpp"

#include "sys_allocs.hpp"

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string_view>

#include <nimble/runtime.hpp>
#include <nimble/runtime/kernel.hpp>

namespace nimble::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A call slower than this gets no warm-up beyond the two cost probes.
constexpr double kSlowCallSeconds = 0.2;
constexpr int kMinCalls = 5;
constexpr int kMaxCalls = 20;

struct Options {
  std::vector<std::string> impls;  // empty: every implementation of the program
  int threads = 1;
  bool quick = false;
  double budget_seconds = 4.0;  // timed calls per case: about this long, within [5, 20] calls
  bool list = false;
  std::vector<std::string> exclude;  // names not to run
};

int failures = 0;

// One registered benchmark and what it keeps between its repetitions.
struct Entry {
  std::string name;
  Case run;
  bool reports_engine_stats = false;
  double flops = 0;
  int warmup_calls = 0;  // still to run before the first timed call
  int warmed_up = 0;     // calls run before the first timed call
  bool have_checksum = false;
  workloads::Checksum sum;
  std::uint64_t kernels_compiled = 0;  // since the case was set up
  std::uint64_t specialized_compiled = 0;
  std::uint64_t disk_hits = 0;
  double compile_ms = 0;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void add_compile_stats(Entry& e) {
  if (!e.reports_engine_stats) return;
  const EngineStats s = engine_stats();
  e.kernels_compiled += s.kernels_compiled;
  e.specialized_compiled += s.specialized_compiled;
  e.disk_hits += s.disk_hits;
  e.compile_ms += s.compile_ms;
}

double p10(const std::vector<double>& v) {
  return percentile(v, 0.10);
}
double p90(const std::vector<double>& v) {
  return percentile(v, 0.90);
}
double minimum(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

// One repetition: the warm-up on the first, then one timed call.
void run_entry(benchmark::State& state, Entry& e) {
  try {
    if (e.warmup_calls > 0) {
      if (e.reports_engine_stats) reset_engine_stats();
      for (; e.warmup_calls > 0; --e.warmup_calls, ++e.warmed_up) e.run.call();
      // The kernels specialized for this case's shapes, compiling in the
      // background since its first call: timed calls run them.
      KernelCache::global().wait_for_background();
      add_compile_stats(e);
    }
    if (e.run.release) e.run.release();
    std::size_t live_before = 0;
    if (e.reports_engine_stats) {
      reset_engine_stats();
      live_before = cpu_allocator().stats().live_bytes;
    }
    double call_seconds = 0;
    std::uint64_t sys_allocs = 0;
    for (auto _ : state) {
      start_counting_sys_allocs();
      const Clock::time_point start = Clock::now();
      e.run.call();
      call_seconds = seconds_since(start);
      sys_allocs = stop_counting_sys_allocs();
      state.SetIterationTime(call_seconds);
    }
    EngineStats s;
    if (e.reports_engine_stats) {
      s = engine_stats();
      add_compile_stats(e);
    }
    if (!e.have_checksum) {
      e.sum = e.run.checksum();
      e.have_checksum = true;
    }
    auto& c = state.counters;
    c["checksum"] = e.sum.sum;
    c["abssum"] = e.sum.abs_sum;
    c["warmup_calls"] = e.warmed_up;
    c["kernels_compiled"] = static_cast<double>(e.kernels_compiled);
    c["compile_ms"] = e.compile_ms;
    c["kernels_specialized"] = static_cast<double>(e.specialized_compiled);
    c["kernels_from_disk"] = static_cast<double>(e.disk_hits);
    c["call_site_hits"] = static_cast<double>(s.call_site_hits);
    c["memory_lookups"] = static_cast<double>(s.memory_hits + s.memory_misses);
    c["launches"] = static_cast<double>(s.kernel_launches);
    c["system_allocations"] = static_cast<double>(s.system_allocations);
    c["sys_allocs"] = static_cast<double>(sys_allocs);
    c["peak_bytes"] =
        static_cast<double>(s.peak_bytes > live_before ? s.peak_bytes - live_before : 0);
    if (e.run.trace_memory) {
      const vm::MemoryTrace m = e.run.trace_memory();
      c["act_peak_bytes"] = static_cast<double>(m.activation_peak_bytes);
      c["act_lower_bound_bytes"] = static_cast<double>(m.activation_lower_bound_bytes);
    }
    if (e.flops > 0 && call_seconds > 0) c["gflops"] = e.flops / call_seconds * 1e-9;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench: %s failed: %s\n", e.name.c_str(), ex.what());
    ++failures;
    state.SkipWithError(ex.what());
  }
}

std::string case_name(const CaseSpec& spec, int threads) {
  return spec.workload + "/" + spec.impl + "/" + (spec.label.empty() ? std::to_string(spec.size) : spec.label) + "/t" +
         std::to_string(threads);
}

// Google Benchmark's filter: empty, "all" and "." select everything; a leading
// '-' negates the regular expression.
bool filter_selects(const std::string& filter, const std::string& name) {
  if (filter.empty() || filter == "all" || filter == ".") return true;
  if (filter[0] == '-') return !std::regex_search(name, std::regex(filter.substr(1)));
  return std::regex_search(name, std::regex(filter));
}

void split_list(const std::string& list, std::vector<std::string>& out) {
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
}

// --impl=, --threads=, --quick, --budget=, --list, --exclude=; removed from argv so that
// Google Benchmark sees only its own flags. Returns false on a bad flag.
bool parse_options(int& argc, char** argv, Options& o) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string_view flag) -> const char* {
      return arg.starts_with(flag) ? argv[i] + flag.size() : nullptr;
    };
    if (const char* v = value("--impl=")) {
      split_list(v, o.impls);
    } else if (const char* x = value("--exclude=")) {
      split_list(x, o.exclude);
    } else if (const char* t = value("--threads=")) {
      o.threads = std::atoi(t);
      if (o.threads < 1) return false;
    } else if (const char* b = value("--budget=")) {
      o.budget_seconds = std::atof(b);
      if (!(o.budget_seconds > 0)) return false;
    } else if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--list") {
      o.list = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return true;
}

// The selected cases: by implementation, and in quick mode the smallest size
// of each workload and implementation.
std::vector<const CaseSpec*> select_cases(const Program& program, const Options& o) {
  std::map<std::pair<std::string, std::string>, std::int64_t> smallest;
  for (const CaseSpec& spec : program.cases) {
    auto [it, inserted] = smallest.try_emplace({spec.workload, spec.impl}, spec.size);
    if (!inserted) it->second = std::min(it->second, spec.size);
  }
  std::vector<const CaseSpec*> selected;
  for (const CaseSpec& spec : program.cases) {
    if (!o.impls.empty() && std::find(o.impls.begin(), o.impls.end(), spec.impl) == o.impls.end())
      continue;
    if (o.quick && smallest.at({spec.workload, spec.impl}) != spec.size) continue;
    if (std::find(o.exclude.begin(), o.exclude.end(), case_name(spec, o.threads)) !=
        o.exclude.end())
      continue;
    selected.push_back(&spec);
  }
  return selected;
}

// --- What the process runs on: CPU, BLAS, OpenMP ------------------------------

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "unknown";
}

int collect_library(dl_phdr_info* info, std::size_t, void* out) {
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
    static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
  return 0;
}

// The loaded shared library whose file name contains `part`, resolved through
// symbolic links (Debian selects BLAS and OpenMP implementations with them).
std::string loaded_library(std::initializer_list<std::string_view> parts) {
  std::vector<std::string> libraries;
  dl_iterate_phdr(&collect_library, &libraries);
  for (std::string_view part : parts) {
    for (const std::string& path : libraries) {
      const std::string_view file = std::string_view(path).substr(path.rfind('/') + 1);
      if (file.find(part) == std::string_view::npos) continue;
      char resolved[PATH_MAX];
      return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
    }
  }
  return "none";
}

// A function of a loaded library, looked up by name (nullptr when absent).
template <class F>
F* loaded_function(const char* name) {
  return reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
}

void add_platform_context(const Options& o) {
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("threads", std::to_string(o.threads));
  benchmark::AddCustomContext("mode", o.quick ? "quick" : "full");
  std::string impls;
  for (const std::string& impl : o.impls) impls += (impls.empty() ? "" : ",") + impl;
  benchmark::AddCustomContext("impls", impls.empty() ? "all" : impls);
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "LD_LIBRARY_PATH"}) {
    const char* v = std::getenv(var);
    benchmark::AddCustomContext(std::string("env_") + var, v != nullptr ? v : "");
  }
  benchmark::AddCustomContext("blas_library", loaded_library({"openblas", "blas"}));
  benchmark::AddCustomContext("openmp_library", loaded_library({"gomp", "libomp", "iomp"}));
  benchmark::AddCustomContext("tbb_library", loaded_library({"libtbb."}));
  if (auto* config = loaded_function<char*()>("openblas_get_config"))
    benchmark::AddCustomContext("blas_config", config());
  if (auto* parallel = loaded_function<int()>("openblas_get_parallel")) {
    static constexpr const char* kModes[] = {"sequential", "pthreads", "openmp"};
    const int mode = parallel();
    benchmark::AddCustomContext("blas_threading",
                                mode >= 0 && mode <= 2 ? kModes[mode] : std::to_string(mode));
  }
  if (auto* threads = loaded_function<int()>("openblas_get_num_threads"))
    benchmark::AddCustomContext("blas_num_threads", std::to_string(threads()));
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

workloads::Checksum checksum_of(const float* values, std::int64_t n) {
  workloads::Checksum c;
  for (std::int64_t i = 0; i < n; ++i) {
    c.sum += values[i];
    c.abs_sum += std::fabs(values[i]);
  }
  return c;
}

int bench_main(int argc, char** argv, Program program) {
  Options o;
  if (!parse_options(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s [--impl=NAME[,NAME]] [--threads=N] [--quick] [--budget=SECONDS] "
                 "[--exclude=NAME[,NAME]] [--list] [Google Benchmark flags]\n",
                 argv[0]);
    return 2;
  }
  const std::vector<const CaseSpec*> selected = select_cases(program, o);
  if (o.list) {
    for (const CaseSpec* spec : selected) std::printf("%s\n", case_name(*spec, o.threads).c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  const std::string filter = benchmark::GetBenchmarkFilter();

  try {
    // Each process compiles its kernels (kernels_compiled, compile_ms), as a
    // first start does, unless NIMBLE_CACHE_DIR asks for a disk cache.
    if (std::getenv("NIMBLE_CACHE_DIR") == nullptr) {
      KernelCacheOptions options = KernelCache::global().options();
      options.disk_cache_dir.clear();
      KernelCache::global().configure(options);
    }
    program.set_threads(o.threads);
    add_platform_context(o);
    if (program.add_context) program.add_context();

    for (const CaseSpec* spec : selected) {
      const std::string name = case_name(*spec, o.threads);
      if (!filter_selects(filter, name)) continue;
      auto e = std::make_shared<Entry>();
      e->name = name;
      e->reports_engine_stats = program.reports_engine_stats;
      e->flops = spec->flops;
      int calls = 1;
      try {
        if (e->reports_engine_stats) reset_engine_stats();
        e->run = spec->make();
        if (!o.quick) {
          // Two calls (the first pays for first-use costs) estimate one call.
          e->run.call();
          const Clock::time_point start = Clock::now();
          e->run.call();
          const double cost = seconds_since(start);
          e->warmed_up = 2;
          e->warmup_calls = cost <= kSlowCallSeconds ? 3 : 0;
          calls = std::clamp(static_cast<int>(o.budget_seconds / std::max(cost, 1e-9)), kMinCalls,
                             kMaxCalls);
        }
        add_compile_stats(*e);
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "bench: %s failed while setting up: %s\n", name.c_str(), ex.what());
        ++failures;
        continue;
      }
      benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
          name.c_str(), [e](benchmark::State& s) { run_entry(s, *e); });
      b->Iterations(1)->Repetitions(calls)->UseManualTime()->Unit(benchmark::kMillisecond);
      if (calls > 1) {
        b->ReportAggregatesOnly(true)
            ->ComputeStatistics("min", &minimum)
            ->ComputeStatistics("p10", &p10)
            ->ComputeStatistics("p90", &p90);
      }
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench: %s\n", ex.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Specializations still compiling in the background finish before main
  // returns: at exit, LLVM's function-local statics made during the first
  // compilations (after the KernelCache) are destroyed before the cache's
  // destructor waits for them, and a compilation still running then crashed
  // in instruction selection (the bench's t2 run, SIGSEGV).
  KernelCache::global().wait_for_background();
  return failures == 0 ? 0 : 1;
}

}  // namespace nimble::bench
