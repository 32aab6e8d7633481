// Deployment, step 1 (where the compiler lives): builds W1-W3, runs each on
// its sizes with the JIT — so that the buckets they meet are compiled
// specialized — and exports each to <dir>/<w>.nimble with a kernel variant
// for this CPU ("host", the JIT's own code) and a portable one ("x86-64").
// Writes <dir>/expected.txt: per workload and size the hash of the JIT-run
// result's bytes, which run_models (linked against nimble::runtime only)
// must reproduce exactly, and its checksums (Σ x, Σ |x|).
//
// With --cuda, each workload is compiled for GPU 0 (compiling and exporting
// need no GPU) and exported with its GPU kernels' PTX for sm_80 and sm_90
// and portable CPU variants (x86-64-v3, x86-64): what script/gpu-check's
// bundle runs on a GPU machine. The expected results are still the CPU
// JIT's; run_models compares a GPU's within a tolerance.
//
//   export_models [dir] [--cuda]     (default dir: deploy-out)
#include <nimble/nimble.hpp>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "deploy/workload_args.hpp"
#include "models/bert.hpp"
#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"

namespace {

nimble::ir::Module build(const std::string& workload) {
  nimble::Builder b;
  if (workload == "w1") nimble::models::build_lstm(b);
  if (workload == "w2") nimble::models::build_tree_lstm(b);
  if (workload == "w3") nimble::models::build_bert(b);
  return b.build();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nimble;
  std::string dir = "deploy-out";
  bool cuda = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cuda") {
      cuda = true;
    } else if (!arg.empty() && arg[0] != '-') {
      dir = arg;
    } else {
      std::fprintf(stderr, "usage: export_models [dir] [--cuda]\n");
      return 2;
    }
  }
  try {
    std::filesystem::create_directories(dir);
    // Specialize each new bucket before the call, so that every bucket the
    // runs meet is compiled when the export asks for it.
    KernelCacheOptions cache = KernelCache::global().options();
    cache.background = false;
    KernelCache::global().configure(cache);

    std::ofstream expected(dir + "/expected.txt");
    std::printf("%-4s %-10s %8s %10s %8s %8s %12s %10s\n", "", "entry", "size", "hash", "kernels", "buckets",
                "bytes", "export_s");
    expected.precision(17);
    for (const deploy::Workload& w : deploy::workloads()) {
      const ir::Module module = build(w.name);
      const vm::Executable exe = compile(module);
      vm::VirtualMachine machine(exe);
      for (std::int64_t size : w.sizes) {
        const Value out = machine.invoke(w.entry, deploy::workload_args(exe, w.name, size));
        const std::uint64_t hash = deploy::result_hash(out);
        const workloads::Checksum sums = deploy::result_checksum(out);
        expected << w.name << ' ' << size << ' ' << hash << ' ' << sums.sum << ' ' << sums.abs_sum << '\n';
        std::printf("%-4s %-10s %8" PRId64 " %016" PRIx64 " sum=%.6g\n", w.name, w.entry, size, hash, sums.sum);
      }
      ExportOptions options;
      options.cpu_targets = {"host", "x86-64"};
      if (cuda) options.cpu_targets = {"x86-64-v3", "x86-64"};
      const std::string path = dir + "/" + w.name + ".nimble";
      const ExportReport r =
          export_executable(cuda ? compile(module, {.target = Device::cuda(0)}) : exe, path, options);
      std::printf("%-4s -> %s: %zu primitives, %zu kernels (%zu specialized, %zu GPU), %zu built-in, %zu variants, "
                  "%zu bytes, %.2f s\n",
                  w.name, path.c_str(), r.primitives, r.kernels, r.specialized, r.gpu_kernels, r.builtins,
                  r.variants, r.bytes, r.seconds);
    }
    if (!expected.flush()) {
      std::fprintf(stderr, "cannot write %s/expected.txt\n", dir.c_str());
      return 1;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "export_models: %s\n", e.what());
    return 1;
  }
  return 0;
}
