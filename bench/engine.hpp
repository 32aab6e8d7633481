// Which nimble engine a benchmark runs on: the one place the bench chooses it.
//
//   nimble       the default engine of the day: the bytecode VM (compile once,
//                invoke per call; kernels from the process's KernelCache);
//   nimble_cuda  the same, compiled for GPU 0 (kernels there, control on the CPU);
//   reference    the reference interpreter (the oracle, Eigen op by op).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nimble/nimble.hpp>

namespace nimble::bench {

enum class Engine { nimble, nimble_cuda, reference };

/// What `Engine::nimble` is today, for the results' context.
inline constexpr const char* kNimbleEngineDescription = "bytecode VM with JIT-compiled kernels (LLVM ORC, one generic kernel per fused group; simplify, fuse_ops, memory planning)";

/// A module's entry point, ready to run many times on one engine. Preparing
/// (compiling, for engines that compile) happens once, in the constructor.
class Runner {
 public:
  Runner(Engine engine, ir::Module module, std::string entry)
      : engine_(engine), module_(std::move(module)), entry_(std::move(entry)) {
    if (engine_ == Engine::nimble) machine_.emplace(compile(module_));
    if (engine_ == Engine::nimble_cuda) machine_.emplace(compile(module_, {.target = Device::cuda(0)}));
  }

  /// Runs the entry on `args` (which are not modified).
  // By reference: copying the arguments would be an allocation of the
  // host's, counted in sys_allocs.
  [[nodiscard]] Value operator()(const std::vector<Value>& args) const {
    switch (engine_) {
      case Engine::reference: return evaluate(module_, entry_, args);
      case Engine::nimble:
      case Engine::nimble_cuda: return machine_->invoke(entry_, args);
    }
    return {};
  }

  /// One call with the VM's memory tracing on (Engine::nimble, nimble_cuda).
  [[nodiscard]] vm::MemoryTrace trace_memory(const std::vector<Value>& args) const {
    machine_->set_memory_tracing(true);
    const Value out = machine_->invoke(entry_, args);
    const vm::MemoryTrace trace = machine_->memory_trace();
    machine_->set_memory_tracing(false);
    return trace;
  }

  [[nodiscard]] Engine engine() const noexcept { return engine_; }
  [[nodiscard]] const ir::Module& module() const noexcept { return module_; }

 private:
  Engine engine_;
  ir::Module module_;
  std::string entry_;
  mutable std::optional<vm::VirtualMachine> machine_;  // a VM is per thread; a Runner is too
};

/// The implementation names of the bench for an engine.
[[nodiscard]] inline std::string_view impl_name(Engine engine) noexcept {
  switch (engine) {
    case Engine::nimble: return "nimble";
    case Engine::nimble_cuda: return "nimble_cuda";
    case Engine::reference: return "nimble_reference";
  }
  return "?";
}

/// Why the nimble_cuda rows cannot run here (no driver, no GPU), or nullopt
/// when GPU 0 is there.
[[nodiscard]] inline std::optional<std::string> cuda_unavailable() {
  try {
    (void)allocator_for(Device::cuda(0));
    return std::nullopt;
  } catch (const Error& e) {
    return e.message();
  }
}

}  // namespace nimble::bench
