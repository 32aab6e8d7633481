#include "codegen/cpu/jit.hpp"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include <atomic>
#include <mutex>

#include "support/check.hpp"

namespace nimble::codegen {

namespace {

std::string to_message(llvm::Error e) {
  std::string s;
  llvm::handleAllErrors(std::move(e), [&](const llvm::ErrorInfoBase& info) { s += info.message(); });
  return s;
}

template <class T>
T take(llvm::Expected<T> value, std::string_view what) {
  if (!value) throw_error(ErrorKind::runtime_error, "JIT: {}: {}", what, to_message(value.takeError()));
  return std::move(*value);
}

class HostJit {
 public:
  HostJit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto builder = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    // Kernels are straight loops: the default codegen level (O2) gives the
    // code of O3 here at a fraction of the instruction-selection time.
    builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
    const auto target_machine = take(builder.createTargetMachine(), "creating the target machine");
    cpu_ = target_machine->getTargetCPU().str();
    features_ = target_machine->getTargetFeatureString().str();
    machine_builder_ = builder;
    jit_ = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(builder)).create(),
                "creating the JIT");
  }

  std::unique_ptr<JitCode> compile(std::unique_ptr<llvm::LLVMContext> context,
                                   std::unique_ptr<llvm::Module> module,
                                   std::span<const std::string> symbols) {
    const std::string name = module->getModuleIdentifier();
    module->setDataLayout(jit_->getDataLayout());
    module->setTargetTriple(jit_->getTargetTriple().str());
    for (llvm::Function& f : *module) {
      f.addFnAttr("target-cpu", cpu_);
      f.addFnAttr("target-features", features_);
    }
    std::string problems;
    llvm::raw_string_ostream os(problems);
    if (llvm::verifyModule(*module, &os))
      throw_error(ErrorKind::runtime_error, "JIT: the kernel {} is invalid LLVM IR: {}", name, problems);
    optimize(*module);

    auto code = std::make_unique<Code>();
    code->tracker = jit_->getMainJITDylib().createResourceTracker();
    llvm::orc::ThreadSafeModule tsm(std::move(module), std::move(context));
    if (llvm::Error e = jit_->addIRModule(code->tracker, std::move(tsm)))
      throw_error(ErrorKind::runtime_error, "JIT: adding {}: {}", name, to_message(std::move(e)));
    for (const std::string& symbol : symbols) {
      auto address = jit_->lookup(symbol);
      if (!address) {
        const std::string why = to_message(address.takeError());
        code.reset();
        throw_error(ErrorKind::runtime_error, "JIT: compiling {}: {}", name, why);
      }
      code->addresses_.push_back(address->toPtr<void*>());
    }
    return code;
  }

 private:
  class Code final : public JitCode {
   public:
    ~Code() override {
      if (tracker) consumeError(tracker->remove());
    }
    const std::vector<void*>& addresses() const noexcept override { return addresses_; }
    llvm::orc::ResourceTrackerSP tracker;
    std::vector<void*> addresses_;
  };

  void optimize(llvm::Module& module) {
    // A TargetMachine per compilation: they are not shared between threads.
    const auto target_machine = take(machine_builder_.createTargetMachine(), "creating the target machine");
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions tuning;
    tuning.LoopVectorization = true;
    tuning.SLPVectorization = true;
    llvm::PassBuilder pb(target_machine.get(), tuning);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
    mpm.run(module, mam);
  }

  llvm::orc::JITTargetMachineBuilder machine_builder_{llvm::Triple()};
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::string cpu_;
  std::string features_;
};

HostJit& host_jit() {
  // Never destroyed: kernels held by statics (the KernelCache) free their
  // code at exit, after any function-local static here would be gone.
  static HostJit* jit = new HostJit();
  return *jit;
}

}  // namespace

std::unique_ptr<JitCode> jit_compile(std::unique_ptr<llvm::LLVMContext> context,
                                     std::unique_ptr<llvm::Module> module,
                                     std::span<const std::string> symbols) {
  return host_jit().compile(std::move(context), std::move(module), symbols);
}

std::string unique_symbol_prefix() {
  static std::atomic<std::uint64_t> next{0};
  return "nimble_k" + std::to_string(next.fetch_add(1));
}

}  // namespace nimble::codegen
