// Deployment, step 2 (where the model runs): linked against nimble::runtime
// only — no compiler, no LLVM — loads the artifacts export_models wrote, runs
// each workload at each size it recorded, and checks that the result is bit
// for bit the JIT-run one — or, for an artifact whose kernels run on a GPU
// (export_models --cuda), that its checksums (Σ x, Σ |x|) are the CPU JIT's
// within 1e-4 of Σ |x| (other schedules sum in other orders). Exits 1 on any
// mismatch or error, 77 when the artifacts need a GPU this machine lacks.
//
//   run_models [dir]     (default: deploy-out)
#include <nimble/runtime.hpp>
#include <nimble/vm.hpp>

#include <chrono>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "deploy/workload_args.hpp"

int main(int argc, char** argv) {
  using namespace nimble;
  const std::string dir = argc > 1 ? argv[1] : "deploy-out";
  std::ifstream expected(dir + "/expected.txt");
  if (!expected) {
    std::fprintf(stderr, "run_models: no %s/expected.txt (run export_models %s first)\n", dir.c_str(), dir.c_str());
    return 1;
  }
  struct Expected {
    std::int64_t size = 0;
    std::uint64_t hash = 0;
    workloads::Checksum sums;
  };
  std::map<std::string, std::vector<Expected>> runs;
  std::string name;
  Expected row;
  while (expected >> name >> row.size >> row.hash >> row.sums.sum >> row.sums.abs_sum) runs[name].push_back(row);

  int failures = 0;
  try {
    // Each call on the exported kernel of its bucket, as export_models ran
    // it: in the background, a new bucket's kernel may be ready for the
    // first call or not, and the generic kernel (which rounds sums in
    // another order) computes it otherwise.
    KernelCacheOptions cache = KernelCache::global().options();
    cache.background = false;
    KernelCache::global().configure(cache);
    for (const deploy::Workload& w : deploy::workloads()) {
      const std::string path = dir + "/" + w.name + ".nimble";
      ArtifactInfo info;
      const auto start = std::chrono::steady_clock::now();
      const vm::Executable exe = load_artifact(path, &info);
      const double load_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      std::printf("%s: %zu bytes, variant %s, %zu kernels (%zu specialized, %zu GPU), %zu built-in, loaded in "
                  "%.1f ms\n",
                  path.c_str(), info.file_bytes, info.cpu_target.c_str(), info.kernels, info.specialized,
                  info.gpu_kernels, info.builtins, load_ms);
      const bool gpu = info.gpu_kernels > 0;
      vm::VirtualMachine machine(exe);
      for (const Expected& want : runs[w.name]) {
        const std::vector<Value> args = deploy::workload_args(exe, w.name, want.size);
        // The first call at a size on a GPU also loads its PTX; the second is timed too.
        for (int call = 0; call < (gpu ? 2 : 1); ++call) {
          const auto t0 = std::chrono::steady_clock::now();
          const Value out = machine.invoke(w.entry, args);
          const double ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          const workloads::Checksum got = deploy::result_checksum(out);
          const double tolerance = 1e-4 * want.sums.abs_sum;
          const bool same = gpu ? std::fabs(got.sum - want.sums.sum) <= tolerance &&
                                      std::fabs(got.abs_sum - want.sums.abs_sum) <= tolerance
                                : deploy::result_hash(out) == want.hash;
          failures += same ? 0 : 1;
          std::printf("  %s %-10s %6" PRId64 "  %8.2f ms  sum=%.10g abssum=%.10g  %s\n", w.name, w.entry, want.size,
                      ms, got.sum, got.abs_sum,
                      !same ? "MISMATCH"
                      : gpu ? "matches the CPU JIT's checksums"
                            : "matches the JIT bit for bit");
        }
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "run_models: %s\n", e.what());
    // Artifacts for a GPU on a machine without one (or without its driver):
    // the conventional "skipped" status, for ctest and scripts.
    return e.kind() == ErrorKind::not_supported && e.message().find("memory on cuda:") != std::string::npos ? 77
                                                                                                           : 1;
  }
  if (failures != 0) std::fprintf(stderr, "run_models: %d results differ from the JIT's\n", failures);
  return failures == 0 ? 0 : 1;
}
