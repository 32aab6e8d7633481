#include "codegen/llvm/jit.hpp"

#include <llvm/ADT/SmallVector.h>
#include <llvm/CodeGen/Passes.h>
#include <llvm/CodeGen/RegAllocRegistry.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCContext.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Allocator.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/StringSaver.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/SubtargetFeature.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "codegen/llvm/kernel_emitter.hpp"
#include "runtime/stats_counters.hpp"
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

// Sets LLVM's command-line option `name` (a bool) for the process, as if
// given on a command line (some passes heed an option only when it was
// given: its position is not 0).
void set_option(llvm::StringRef name, bool value) {
  if (auto* option = llvm::cl::getRegisteredOptions().lookup(name)) {
    static_cast<llvm::cl::opt<bool>*>(option)->setValue(value);
    option->setPosition(1);
  }
}

// NIMBLE_LLVM_ARGS="-opt=value ...": LLVM command-line options for the JIT's
// process (to compare code generation choices without a rebuild, as Julia's
// JULIA_LLVM_ARGS does). Returns them as they enter the target id (and so
// the disk cache's keys: a kernel compiled under other options is another
// kernel). A malformed option is an error, not ignored.
std::string apply_llvm_args() {
  const char* text = std::getenv("NIMBLE_LLVM_ARGS");
  if (text == nullptr || *text == '\0') return {};
  llvm::SmallVector<const char*, 8> argv{"nimble"};
  llvm::BumpPtrAllocator storage;
  llvm::StringSaver saver(storage);
  llvm::cl::TokenizeGNUCommandLine(text, saver, argv);
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", &os))
    throw_error(ErrorKind::invalid_argument, "NIMBLE_LLVM_ARGS: LLVM rejects \"{}\": {}", text, problems);
  return fmt::format(" llvm-args {}", text);
}

class HostJit {
 public:
  HostJit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // Loop strength reduction costs a third of instruction selection's time
    // on kernels' vector loops and gains nothing measurable on them (x86
    // addressing modes take base + index * scale). LLVM offers no per-target
    // switch: this is its command-line option, set for the process.
    set_option("disable-lsr", true);
    // The post-RA list scheduler (which LLVM runs for Zen's scheduling model,
    // not for Intel's) costs 8% of code generation over the W1-W3 kernels
    // (callgrind); out-of-order cores reorder the kernels' few hundred
    // instructions themselves.
    set_option("post-RA-scheduler", false);
    // Passes of the O2 code generation pipeline that cost more compile time
    // than the kernels gain from them (callgrind over the W1-W3 kernels:
    // 1333 -> 1239 M instructions for the pre-RA machine scheduler, 2.1%,
    // 1.6%, 2.0% and 1.6% for the others; W1-W3 and the BERT products ran
    // as fast without them, alternated in one sitting). The scheduler's
    // order matters little to an out-of-order core on loops of loads and
    // FMAs; the kernels' loads are already distinct and their values
    // already placed by the IR passes. Machine LICM stays: without it W1
    // and W2 ran 8-10% slower (constants rematerialized inside loops).
    set_option("enable-misched", false);
    set_option("disable-x86-domain-reassignment", true);
    set_option("disable-machine-cse", true);
    set_option("disable-machine-sink", true);
    set_option("disable-copyprop", true);
    const std::string llvm_args = apply_llvm_args();
    // LLVM's basic register allocator: the kernels' loops need no live range
    // splitting, and the greedy allocator's eviction and splitting cost a
    // quarter of a fused GELU stage's code generation (its hoisted
    // constants); over W1-W3's kernels, 7% less compile time and the same
    // run times (W1-W3, the BERT products, SGEMM, ELEMWISE, alternated).
    // Unless NIMBLE_LLVM_ARGS chose one.
    if (auto* regalloc = llvm::cl::getRegisteredOptions().lookup("regalloc");
        regalloc == nullptr || regalloc->getNumOccurrences() == 0)
      llvm::RegisterRegAlloc::setDefault(llvm::createBasicRegisterAllocator);
    auto builder = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    // Kernels are straight loops: the default codegen level (O2) gives the
    // code of O3 here at a fraction of the instruction-selection time.
    builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
    const auto target_machine = take(builder.createTargetMachine(), "creating the target machine");
    cpu_ = target_machine->getTargetCPU().str();
    features_ = target_machine->getTargetFeatureString().str();
    machine_builder_ = builder;
    target_id_ = fmt::format("{} {} {}{}", target_machine->getTargetTriple().str(), cpu_, features_, llvm_args);
    jit_ = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(builder)).create(),
                "creating the JIT");
  }

  std::string compile(std::unique_ptr<llvm::LLVMContext> context, std::unique_ptr<llvm::Module> module) {
    ThreadCodegen& codegen = thread_codegen();
    return compile_with(*codegen.machine, cpu_, features_, std::move(context), std::move(module), &codegen);
  }

  std::string compile_pic(std::unique_ptr<llvm::LLVMContext> context, std::unique_ptr<llvm::Module> module,
                          const ObjectTarget& target) {
    llvm::orc::JITTargetMachineBuilder builder = machine_builder_;
    builder.setCPU(target.cpu);
    builder.getFeatures() = llvm::SubtargetFeatures(target.features);
    builder.setRelocationModel(llvm::Reloc::PIC_);
    const auto machine = take(builder.createTargetMachine(), "creating a target machine for " + target.cpu);
    return compile_with(*machine, target.cpu, target.features, std::move(context), std::move(module), nullptr);
  }

  ObjectTarget object_target() const { return {cpu_, features_}; }

  unsigned vector_bits(const ObjectTarget& t) const {
    const std::string triple = machine_builder_.getTargetTriple().str();
    std::string error;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
    if (target == nullptr) throw_error(ErrorKind::runtime_error, "JIT: no LLVM target for {}: {}", triple, error);
    const std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, t.cpu, t.features));
    if (!info) throw_error(ErrorKind::runtime_error, "JIT: LLVM does not know the CPU {}", t.cpu);
    if (info->checkFeatures("+avx512f")) return 512;
    if (info->checkFeatures("+avx")) return 256;
    return 128;
  }

  std::unique_ptr<JitCode> link(std::string_view name, std::string_view object,
                                std::span<const std::string> symbols) {
    // Each kernel in a JITDylib of its own: an object from the disk cache
    // names its symbols as the process that compiled it did, and the same
    // kernel may be loaded again after the cache forgot it.
    auto code = std::make_unique<Code>(*jit_);
    auto dylib = jit_->createJITDylib(fmt::format("{}.{}", name, next_dylib_.fetch_add(1)));
    if (!dylib)
      throw_error(ErrorKind::runtime_error, "JIT: creating a JITDylib for {}: {}", name,
                  to_message(dylib.takeError()));
    code->dylib = &*dylib;
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()),
                                                       std::string(name));
    if (llvm::Error e = jit_->addObjectFile(*code->dylib, std::move(buffer)))
      throw_error(ErrorKind::runtime_error, "JIT: adding {}: {}", name, to_message(std::move(e)));
    for (const std::string& symbol : symbols) {
      auto address = jit_->lookup(*code->dylib, symbol);
      if (!address)
        throw_error(ErrorKind::runtime_error, "JIT: linking {}: {}", name, to_message(address.takeError()));
      code->addresses_.push_back(address->toPtr<void*>());
    }
    return code;
  }

  const std::string& target_id() const noexcept { return target_id_; }

 private:
  class Code final : public JitCode {
   public:
    explicit Code(llvm::orc::LLJIT& jit) : jit_(jit) {}
    ~Code() override {
      if (dylib != nullptr) consumeError(jit_.getExecutionSession().removeJITDylib(*dylib));
    }
    const std::vector<void*>& addresses() const noexcept override { return addresses_; }
    llvm::orc::LLJIT& jit_;
    llvm::orc::JITDylib* dylib = nullptr;
    std::vector<void*> addresses_;
  };

  // The calling thread's TargetMachine and code generation pipeline, made on
  // its first compilation. A TargetMachine is not thread-safe, and making one
  // (with its subtarget: parsing the host's feature string) costs ~2 ms, a
  // fifth of a small kernel's compilation. Building the code generation
  // pipeline (TargetPassConfig's ~150 passes, scheduled by the legacy pass
  // manager) costs ~0.5 ms more: a quarter of a tiny kernel's code
  // generation. The pipeline runs module after module, as `llc -run-twice`
  // does (its passes finalize their state per module; the objects are the
  // ones a fresh pipeline makes, byte for byte: checked on every W1-W3
  // kernel), writing into one buffer cleared per kernel.
  struct ThreadCodegen {
    std::unique_ptr<llvm::TargetMachine> machine;
    llvm::SmallVector<char, 0> object;
    llvm::raw_svector_ostream stream{object};
    llvm::legacy::PassManager passes;
  };

  ThreadCodegen& thread_codegen() {
    thread_local std::unique_ptr<ThreadCodegen> codegen;
    if (!codegen) {
      auto made = std::make_unique<ThreadCodegen>();
      made->machine = take(machine_builder_.createTargetMachine(), "creating the target machine");
      llvm::MCContext* mc = nullptr;
      if (made->machine->addPassesToEmitMC(made->passes, mc, made->stream))
        throw_error(ErrorKind::runtime_error, "JIT: the target cannot emit object code");
      codegen = std::move(made);
    }
    return *codegen;
  }

  // Optimizes and compiles `module` for `machine` into an object file, with
  // `codegen`'s pipeline (for `machine`) or a new one.
  std::string compile_with(llvm::TargetMachine& machine, const std::string& cpu, const std::string& features,
                           std::unique_ptr<llvm::LLVMContext> context, std::unique_ptr<llvm::Module> module,
                           ThreadCodegen* codegen) {
    const std::string name = module->getModuleIdentifier();
    module->setDataLayout(machine.createDataLayout());
    module->setTargetTriple(machine.getTargetTriple().str());
    for (llvm::Function& f : *module) {
      f.addFnAttr("target-cpu", cpu);
      f.addFnAttr("target-features", features);
    }
    std::string problems;
    llvm::raw_string_ostream os(problems);
    if (llvm::verifyModule(*module, &os))
      throw_error(ErrorKind::runtime_error, "JIT: the kernel {} is invalid LLVM IR: {}", name, problems);
    dump(*module, name + ".in");
    const auto optimizing = std::chrono::steady_clock::now();
    optimize(*module, machine);
    stats::add_compile_phase(stats::CompilePhase::optimize, stats::nanoseconds_since(optimizing));
    dump(*module, name);
    const auto generating = std::chrono::steady_clock::now();
    std::string bytes;
    if (codegen != nullptr) {
      codegen->object.clear();
      codegen->passes.run(*module);
      bytes.assign(codegen->object.data(), codegen->object.size());
    } else {
      auto object = take(llvm::orc::SimpleCompiler(machine)(*module), "compiling " + name);
      bytes.assign(object->getBufferStart(), object->getBufferSize());
    }
    stats::add_compile_phase(stats::CompilePhase::codegen, stats::nanoseconds_since(generating));
    module.reset();
    context.reset();
    return bytes;
  }

  // Kernels are single functions of a few loops: the default O2 pipeline's
  // inliner, IPO and loop passes for general code cost 2-3x the time of this
  // one for the same vector loops (measured on the W1-W3 kernels). Without
  // indvars (a fifth of this pipeline's time: the emitter's loops already
  // count by one from begin to end) and without a LICM and an InstCombine
  // after vectorizing, the same kernels optimize in 22% less time (opt
  // -time-passes over W1-W3's 31 kernels dumped with NIMBLE_DUMP_KERNELS:
  // 220 -> 173 ms) and vectorize the same.
  // The emitter's only allocas are whole scalars and vectors (accumulators)
  // and a packing panel that stays in memory: mem2reg promotes the same ones
  // as SROA (identical optimized IR over W1-W3's kernels) at a fraction of
  // its cost (SROA was a quarter of this pipeline's time on a dense kernel).
  static constexpr const char* kPipeline =
      "mem2reg,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,loop-simplify,lcssa,"
      "loop-mssa(licm),loop(loop-rotate),loop-simplify,lcssa,loop-vectorize,"
      "loop-simplify,instcombine<no-verify-fixpoint>,simplifycfg";
  // A stage the emitter vectorized itself (kExplicitVectorsAttribute) and
  // the prologue (optnone: this pass manager runs no instrumentation that
  // would skip it, and its checks fold): the same up to the vectorizer,
  // which finds nothing there;
  // without it and the InstCombine after it, such a function optimizes in
  // about a quarter less time, into the same machine code (instruction
  // counts of W1-W3's dense kernels within 1%).
  static constexpr const char* kExplicitVectorsPipeline =
      "mem2reg,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,loop-simplify,lcssa,"
      "loop-mssa(licm),loop(loop-rotate),simplifycfg";

  void optimize(llvm::Module& module, llvm::TargetMachine& machine) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(&machine);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::FunctionPassManager full;
    llvm::FunctionPassManager explicit_vectors;
    for (auto [pipeline, text] : {std::pair{&full, kPipeline}, std::pair{&explicit_vectors, kExplicitVectorsPipeline}})
      if (llvm::Error e = pb.parsePassPipeline(*pipeline, text))
        throw_error(ErrorKind::runtime_error, "JIT: the optimization pipeline: {}", to_message(std::move(e)));
    for (llvm::Function& f : module) {
      if (f.isDeclaration()) continue;
      const bool vectorized = f.hasOptNone() || f.hasFnAttribute(kExplicitVectorsAttribute);
      (vectorized ? explicit_vectors : full).run(f, fam);
    }
  }

  // With NIMBLE_DUMP_KERNELS=<dir>, each kernel's IR goes to
  // <dir>/<module>.in.ll as emitted and <dir>/<module>.ll as optimized (opt
  // and llc read them back: to read what the JIT compiled, and to time
  // pipelines with -time-passes).
  static void dump(const llvm::Module& module, const std::string& name) {
    static const char* const dir = std::getenv("NIMBLE_DUMP_KERNELS");
    if (dir == nullptr || *dir == '\0') return;
    std::error_code error;
    llvm::raw_fd_ostream out(std::string(dir) + "/" + name + ".ll", error);
    if (error)
      throw_error(ErrorKind::invalid_argument, "NIMBLE_DUMP_KERNELS: cannot write {}/{}.ll: {}", dir,
                  name, error.message());
    module.print(out, nullptr);
  }

  llvm::orc::JITTargetMachineBuilder machine_builder_{llvm::Triple()};
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::string cpu_;
  std::string features_;
  std::string target_id_;
  std::atomic<std::uint64_t> next_dylib_{0};
};

HostJit& host_jit() {
  // Never destroyed: kernels held by statics (the KernelCache) free their
  // code at exit, after any function-local static here would be gone.
  static HostJit* jit = new HostJit();
  return *jit;
}

}  // namespace

std::string compile_to_object(std::unique_ptr<llvm::LLVMContext> context, std::unique_ptr<llvm::Module> module) {
  return host_jit().compile(std::move(context), std::move(module));
}

std::unique_ptr<JitCode> jit_link(std::string_view name, std::string_view object,
                                  std::span<const std::string> symbols) {
  return host_jit().link(name, object, symbols);
}

const std::string& jit_target_id() { return host_jit().target_id(); }

ObjectTarget jit_object_target() { return host_jit().object_target(); }

unsigned vector_bits(const ObjectTarget& target) { return host_jit().vector_bits(target); }

std::string compile_to_pic_object(std::unique_ptr<llvm::LLVMContext> context, std::unique_ptr<llvm::Module> module,
                                  const ObjectTarget& target) {
  return host_jit().compile_pic(std::move(context), std::move(module), target);
}

std::string unique_symbol_prefix() {
  static std::atomic<std::uint64_t> next{0};
  return "nimble_k" + std::to_string(next.fetch_add(1));
}

}  // namespace nimble::codegen
