// Deployment, step 2 (where the model runs): linked against nimble::runtime
// only — no compiler, no LLVM — loads the artifacts export_models wrote, runs
// each workload at each size it recorded, and checks that the result is bit
// for bit the JIT-run one. Exits 1 on any mismatch or error.
//
//   run_models [dir]     (default: deploy-out)
#include <nimble/runtime.hpp>
#include <nimble/vm.hpp>

#include <chrono>
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
  std::map<std::string, std::vector<std::pair<std::int64_t, std::uint64_t>>> runs;
  std::string name;
  std::int64_t size = 0;
  std::uint64_t hash = 0;
  while (expected >> name >> size >> hash) runs[name].emplace_back(size, hash);

  int failures = 0;
  try {
    for (const deploy::Workload& w : deploy::workloads()) {
      const std::string path = dir + "/" + w.name + ".nimble";
      ArtifactInfo info;
      const auto start = std::chrono::steady_clock::now();
      const vm::Executable exe = load_artifact(path, &info);
      const double load_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      std::printf("%s: %zu bytes, variant %s, %zu kernels (%zu specialized), %zu built-in, loaded in %.1f ms\n",
                  path.c_str(), info.file_bytes, info.cpu_target.c_str(), info.kernels, info.specialized,
                  info.builtins, load_ms);
      vm::VirtualMachine machine(exe);
      for (const auto& [n, want] : runs[w.name]) {
        const std::vector<Value> args = deploy::workload_args(exe, w.name, n);
        const auto t0 = std::chrono::steady_clock::now();
        const Value out = machine.invoke(w.entry, args);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const std::uint64_t got = deploy::result_hash(out);
        const bool same = got == want;
        failures += same ? 0 : 1;
        std::printf("  %s %-10s %6" PRId64 "  %8.2f ms  sum=%.6g  %s\n", w.name, w.entry, n, ms,
                    deploy::result_sum(out), same ? "matches the JIT bit for bit" : "MISMATCH");
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "run_models: %s\n", e.what());
    return 1;
  }
  if (failures != 0) std::fprintf(stderr, "run_models: %d results differ from the JIT's\n", failures);
  return failures == 0 ? 0 : 1;
}
