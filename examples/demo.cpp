// nimble's demo (script/demo): one model, compiled once, run on sentences of
// different lengths. The LSTM of bench/README.md is written with the
// builder (examples/models/lstm.hpp); nimble infers that it maps f32[?, 1, 300]
// to f32[?, 1, 512], compiles it to bytecode once, and runs it on the VM for
// any length, checking each input against the declared type.
//
// Kernels are compiled on first use: a generic kernel per fused group, then
// one specialized per shape bucket in the background while the generic one
// serves. Each line says where the call's kernels came from — compiled now,
// the process's memory, or the disk cache that an earlier run left (run the
// demo twice) — and what is still compiling in the background.
#include <nimble/nimble.hpp>
#include <nimble/runtime/kernel.hpp>

#include <chrono>

#include "models/lstm.hpp"
#include "models/workloads.hpp"

namespace {

// Where one call's kernels came from: the engine's counters over the call.
struct KernelSources {
  std::uint64_t compiled = 0;
  std::uint64_t specialized = 0;
  std::uint64_t memory = 0;
  std::uint64_t disk = 0;

  static KernelSources between(const nimble::EngineStats& before, const nimble::EngineStats& after) {
    return {after.kernels_compiled - before.kernels_compiled,
            after.specialized_compiled - before.specialized_compiled,
            (after.memory_hits + after.call_site_hits) - (before.memory_hits + before.call_site_hits),
            after.disk_hits - before.disk_hits};
  }
};

}  // namespace

int main() {
  using namespace nimble;
  const HostTarget& target = host_target();
  fmt::print("nimble {} (LLVM {}) on {}, cpu {}\n", kVersion, llvm_version(), target.triple, target.cpu);
  const std::string disk = KernelCache::global().options().disk_cache_dir;
  fmt::print("kernel cache on disk: {}\n\n", disk.empty() ? "off" : disk);
  try {
    Builder b;
    const Function lstm = models::build_lstm(b);
    const ir::Module module = b.build();
    fmt::print("@lstm : {}\n", ir::to_string(module.find_function(lstm.name()).type()));
    vm::VirtualMachine machine(compile(module));
    fmt::print("compiled to bytecode once; entry points: {}\n\n",
               fmt::join(machine.executable().entry_points(), ", "));

    const std::vector<Tensor> weights = workloads::w1_weights();
    fmt::print("{:>6}  {:>10}  {:>8} {:>13} {:>9} {:>9}  {:>10}  {}\n", "words", "latency", "compiled",
               "(specialized)", "in memory", "from disk", "background", "checksum");
    const EngineStats start = engine_stats();
    for (std::int64_t length : {3, 17, 17, 64, 5, 64, 3, 128, 40}) {
      std::vector<Value> args{workloads::w1_input(length)};
      args.insert(args.end(), weights.begin(), weights.end());
      const EngineStats before = engine_stats();
      const auto t0 = std::chrono::steady_clock::now();
      const Tensor out = machine.invoke(lstm.name(), args).tensor();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const EngineStats after = engine_stats();
      const KernelSources k = KernelSources::between(before, after);
      workloads::Checksum c;
      c.add(out);
      fmt::print("{:>6}  {:>7.2f} ms  {:>8} {:>13} {:>9} {:>9}  {:>10}  {}\n", length, ms, k.compiled,
                 fmt::format("({})", k.specialized), k.memory, k.disk,
                 after.specializations_pending == 0 ? std::string("-")
                                                    : fmt::format("{} pending", after.specializations_pending),
                 workloads::checksum_line("W1", length, c));
    }
    KernelCache::global().wait_for_background();
    const KernelSources total = KernelSources::between(start, engine_stats());
    fmt::print("\nin all: {} kernels compiled ({} specialized for a shape bucket, {:.0f} ms), {} calls served "
               "from memory, {} kernels loaded from disk in {:.1f} ms\n",
               total.compiled, total.specialized, engine_stats().compile_ms, total.memory, total.disk,
               engine_stats().disk_load_ms);
    if (!disk.empty() && total.disk == 0)
      fmt::print("run the demo again: the next process loads these kernels from {}\n", disk);

    // A sentence of the wrong width is reported, not computed.
    std::vector<Value> bad{Tensor::zeros({5, 1, 200}, DType::f32)};
    bad.insert(bad.end(), weights.begin(), weights.end());
    (void)machine.invoke(lstm.name(), bad);
  } catch (const Error& e) {
    fmt::print("\nnimble::Error ({}): {}\n", to_string(e.kind()), e.what());
  }
  return 0;
}
