#include "codegen/cuda/gpu_kernel.hpp"

#include <llvm/ADT/SmallString.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "codegen/cuda/gpu_schedule.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/kernel_store.hpp"
#include "codegen/llvm/host_code.hpp"
#include "codegen/llvm/jit.hpp"
#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/stored_kernel.hpp"
#include "runtime/cuda/cuda_kernel.hpp"
#include "runtime/cuda/cuda_stages.hpp"
#include "runtime/stats_counters.hpp"
#include "support/check.hpp"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace nimble::codegen {

int CudaTarget::ptx_version() const {
  switch (compute_capability) {
    case 80: return 70;
    case 86: return 71;
    case 87: return 74;
    case 89: return 78;
    case 90: return 78;
    default:
      throw_error(ErrorKind::not_supported, "not supported: code for sm_{} (nimble targets sm_80, 86, 87, 89, 90)",
                  compute_capability);
  }
}

namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";

// Fills `f` (defined, no blocks yet) with
//   for (i = first; i < end; i += step) if ((code = call(i)) != 0) return code;
//   return 0;
// `first(builder)` is made in the entry block.
template <class First, class Call>
void first_failure_loop(llvm::Function* f, First&& first, llvm::Value* end, llvm::Value* step, Call&& call) {
  llvm::LLVMContext& c = f->getContext();
  llvm::BasicBlock* entry = llvm::BasicBlock::Create(c, "entry", f);
  llvm::BasicBlock* header = llvm::BasicBlock::Create(c, "header", f);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(c, "body", f);
  llvm::BasicBlock* next = llvm::BasicBlock::Create(c, "next", f);
  llvm::BasicBlock* failed = llvm::BasicBlock::Create(c, "failed", f);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c, "done", f);
  llvm::IRBuilder<> b(entry);
  llvm::Value* start = first(b);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  i->addIncoming(start, entry);
  b.CreateCondBr(b.CreateICmpSLT(i, end), body, done);
  b.SetInsertPoint(body);
  llvm::Value* code = call(b, i);
  b.CreateCondBr(b.CreateICmpNE(code, b.getInt32(0)), failed, next);
  b.SetInsertPoint(failed);
  b.CreateRet(code);
  b.SetInsertPoint(next);
  i->addIncoming(b.CreateAdd(i, step, "", true, true), next);
  b.CreateBr(header);
  b.SetInsertPoint(done);
  b.CreateRet(b.getInt32(0));
}

// Renames stage function `stage` (i32 (data, dims, info, begin, end)) to
// <name>.body and defines, inlined into its callers,
//   i32 <name>.threads(data, dims, info, begin, end, thread, threads)
// which runs it for the iterations begin + thread, + threads, … below end,
// one at a time, and returns the first failure's code (0: none).
llvm::Function* grid_stride(llvm::Function* stage) {
  const std::string name = stage->getName().str();
  stage->setName(name + ".body");
  stage->setLinkage(llvm::GlobalValue::InternalLinkage);
  stage->addFnAttr(llvm::Attribute::AlwaysInline);
  llvm::Module& m = *stage->getParent();
  llvm::LLVMContext& c = m.getContext();
  llvm::Type* i64 = llvm::Type::getInt64Ty(c);
  llvm::Type* ptr = llvm::PointerType::getUnqual(c);
  auto* type = llvm::FunctionType::get(llvm::Type::getInt32Ty(c), {ptr, ptr, ptr, i64, i64, i64, i64}, false);
  llvm::Function* f = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name + ".threads", m);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  first_failure_loop(
      f, [&](llvm::IRBuilder<>& b) { return b.CreateAdd(f->getArg(3), f->getArg(5)); }, f->getArg(4), f->getArg(6),
      [&](llvm::IRBuilder<>& b, llvm::Value* i) {
        return b.CreateCall(stage, {f->getArg(0), f->getArg(1), f->getArg(2), i,
                                    b.CreateAdd(i, b.getInt64(1), "", true, true)});
      });
  return f;
}

// A tile's threads, and a block reduction's, are a block's: their entries'
// grid-stride threads are blocks.
static_assert(GpuProductTile::kThreads == cuda::CudaStages::kBlockThreads);
static_assert(kBlockLanes == cuda::CudaStages::kBlockThreads);

// The PTX entry `name` over grid-stride function `threads`, for a stage of
// `lanes` lanes an iteration: its thread of the grid-stride loop is
// (ctaid.x * ntid.x + tid.x) / lanes of nctaid.x * ntid.x / lanes (a warp,
// for 32 lanes: blocks are whole warps; a block for a tile's 256); a
// failure's code goes to *status if nothing is there yet.
void define_entry(llvm::Function* threads, const std::string& name, unsigned lanes) {
  llvm::Module& m = *threads->getParent();
  llvm::LLVMContext& c = m.getContext();
  llvm::Type* i64 = llvm::Type::getInt64Ty(c);
  llvm::Type* ptr = llvm::PointerType::getUnqual(c);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, ptr, ptr, ptr, i64, i64}, false);
  llvm::Function* f = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, name, m);
  f->setCallingConv(llvm::CallingConv::PTX_Kernel);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned k = 0; k < 4; ++k) f->addParamAttr(k, llvm::Attribute::NoAlias);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
  const auto sreg = [&](llvm::Intrinsic::ID id) { return b.CreateZExt(b.CreateIntrinsic(id, {}, {}), i64); };
  llvm::Value* block_size = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
  llvm::Value* thread = b.CreateAdd(b.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), block_size),
                                    sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x));
  llvm::Value* count = b.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x), block_size);
  if (lanes > 1) {
    thread = b.CreateUDiv(thread, b.getInt64(lanes));
    count = b.CreateUDiv(count, b.getInt64(lanes));
  }
  llvm::Value* code = b.CreateCall(threads, {f->getArg(0), f->getArg(1), f->getArg(2), f->getArg(4), f->getArg(5),
                                             thread, count});
  llvm::BasicBlock* failed = llvm::BasicBlock::Create(c, "failed", f);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c, "done", f);
  b.CreateCondBr(b.CreateICmpNE(code, b.getInt32(0)), failed, done);
  b.SetInsertPoint(failed);
  b.CreateAtomicCmpXchg(f->getArg(3), b.getInt32(0), code, llvm::MaybeAlign(4), llvm::AtomicOrdering::Monotonic,
                        llvm::AtomicOrdering::Monotonic);
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  // Older NVPTX backends know kernels by this annotation only.
  llvm::Metadata* kernel[] = {llvm::ValueAsMetadata::get(f), llvm::MDString::get(c, "kernel"),
                              llvm::ValueAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), 1))};
  m.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(c, kernel));
}

const llvm::Target& nvptx() {
  static const llvm::Target* const target = [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    std::string error;
    const llvm::Target* t = llvm::TargetRegistry::lookupTarget(kTriple, error);
    if (t == nullptr) throw_error(ErrorKind::not_supported, "not supported: LLVM has no NVPTX backend: {}", error);
    return t;
  }();
  return *target;
}

// The module's PTX: verified, optimized (inlining the stages into their
// entries) and compiled by the NVPTX backend.
std::string compile_to_ptx(llvm::Module& m, const CudaTarget& target) {
  const std::string sm = fmt::format("sm_{}", target.compute_capability);
  const std::unique_ptr<llvm::TargetMachine> machine(nvptx().createTargetMachine(
      kTriple, sm, fmt::format("+ptx{}", target.ptx_version()), llvm::TargetOptions(), std::nullopt, std::nullopt,
      llvm::CodeGenOptLevel::Default));
  m.setTargetTriple(kTriple);
  m.setDataLayout(machine->createDataLayout());
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(m, &os))
    throw_error(ErrorKind::runtime_error, "CUDA codegen: the kernel {} is invalid LLVM IR: {}",
                m.getModuleIdentifier(), problems);
  {
    const auto optimizing = std::chrono::steady_clock::now();
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(machine.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
    mpm.run(m, mam);
    stats::add_compile_phase(stats::CompilePhase::optimize, stats::nanoseconds_since(optimizing));
  }
  const auto generating = std::chrono::steady_clock::now();
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream out(ptx);
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw_error(ErrorKind::runtime_error, "CUDA codegen: the NVPTX backend cannot emit PTX for {}", sm);
  pm.run(m);
  stats::add_compile_phase(stats::CompilePhase::codegen, stats::nanoseconds_since(generating));
  return std::string(ptx.str());
}

// A tensor whose elements evaluating `e` reads, or null.
const te::LoadNode* first_load(const te::Expr& e) {
  if (!e.defined()) return nullptr;
  if (const auto* l = e.as<te::LoadNode>()) return l;
  const te::LoadNode* found = nullptr;
  te::for_each_child(e, [&](const te::Expr& child) {
    if (found == nullptr) found = first_load(child);
  });
  return found;
}

// The name of a tensor whose elements the prologue of `ir` reads (shapes
// given as tensors: zeros(shape) …), or "" when it reads shapes only. The
// prologue runs on the host; those elements are on the device.
std::string prologue_reads_elements(const KernelIR& ir) {
  std::vector<const te::Expr*> read;
  for (const KernelIR::DimCheck& c : ir.input_dims) read.push_back(&c.expected);
  for (const KernelIR::DimCheck& c : ir.output_dims) read.push_back(&c.expected);
  for (const KernelCheck& c : ir.checks) read.push_back(&c.condition);
  for (const Stage& s : ir.stages) {
    read.push_back(&s.body->extent);
    read.push_back(&s.work);
  }
  for (const Buffer& b : ir.buffers)
    if (b.role == Buffer::Role::temp)
      for (const te::Expr& d : b.tensor.shape()) read.push_back(&d);
  for (const te::Expr* e : read)
    if (const te::LoadNode* l = first_load(*e)) return l->tensor.name();
  return "";
}

// The GPU's threads for the emitter (GpuOps) through NVVM's intrinsics: the
// lane id and shuffles across the whole warp (a stage of lanes runs whole
// warps, none of whose lanes leaves early: its elements cannot fail), the
// thread in the block, bar.sync 0, and shared memory as addrspace(3)
// arrays (NVPTX infers ld.shared / st.shared from their generic pointers).
class NvvmOps final : public GpuOps {
 public:
  llvm::Value* lane(llvm::IRBuilderBase& b) const override {
    return b.CreateZExt(b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_laneid, {}, {}), b.getInt64Ty());
  }
  llvm::Value* exchange(llvm::IRBuilderBase& b, llvm::Value* value, unsigned mask) const override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
                             {b.getInt32(0xffffffffu), value, b.getInt32(mask), b.getInt32(kWarpLanes - 1)});
  }
  llvm::Value* thread(llvm::IRBuilderBase& b) const override {
    return b.CreateZExt(b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}), b.getInt64Ty());
  }
  void barrier(llvm::IRBuilderBase& b) const override { b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {}); }
  llvm::Value* shared_array(llvm::IRBuilderBase& b, llvm::Type* element, unsigned count,
                            const char* name) const override {
    llvm::Module& m = *b.GetInsertBlock()->getModule();
    auto* type = llvm::ArrayType::get(element, count);
    auto* array = new llvm::GlobalVariable(m, type, false, llvm::GlobalValue::InternalLinkage,
                                           llvm::PoisonValue::get(type), name, nullptr,
                                           llvm::GlobalValue::NotThreadLocal, kSharedAddressSpace);
    array->setAlignment(llvm::Align(16));
    return b.CreateAddrSpaceCast(array, b.getPtrTy());
  }

 private:
  static constexpr unsigned kSharedAddressSpace = 3;
};

const NvvmOps kNvvmOps;

// The prologue and stages of `scheduled` (schedule_for_gpu's), the stages
// as plain loop nests (register tiles off), in a new module of `context`;
// the lanes of a warp stage are `lanes` (null: the host runs them).
EmittedKernel emit_stages(const KernelIR& scheduled, llvm::LLVMContext& context, const std::string& prefix,
                          const GpuOps* lanes) {
  return emit_cpu_kernel(scheduled, context, prefix,
                         CpuEmitOptions{.vector_bits = 256, .register_tiles = false, .gpu = lanes});
}

}  // namespace

PtxKernel emit_ptx(const KernelIR& kernel, const std::string& symbol_prefix, const CudaTarget& target) {
  (void)target.ptx_version();  // an SM nimble does not target fails before any work
  llvm::LLVMContext context;
  const KernelIR scheduled = schedule_for_gpu(kernel);
  EmittedKernel emitted = emit_stages(scheduled, context, symbol_prefix, &kNvvmOps);
  llvm::Module& m = *emitted.module;
  m.getFunction(emitted.prologue)->eraseFromParent();
  PtxKernel out;
  for (std::size_t k = 0; k < emitted.stages.size(); ++k) {
    const std::string& stage = emitted.stages[k];
    define_entry(grid_stride(m.getFunction(stage)), stage, scheduled.stages[k].lanes);
    out.entries.push_back(stage);
  }
  out.ptx = compile_to_ptx(m, target);
  out.errors = std::move(emitted.errors);
  return out;
}

PtxKernel gpu_kernel_ptx(const std::string& name, std::span<const te::Tensor> inputs,
                         std::span<const te::Tensor> outputs, const CudaTarget& target) {
  return emit_ptx(lower_to_kernel_ir(name, inputs, outputs), unique_symbol_prefix(), target);
}

HostCode gpu_schedule_host_code(const KernelIR& kernel, unsigned threads) {
  NIMBLE_ASSERT(threads >= 1, "a grid has at least one thread");
  return compile_host_code(kernel, [threads](const KernelIR& ir, llvm::LLVMContext& context,
                                             const std::string& prefix) {
    EmittedKernel emitted = emit_stages(schedule_for_gpu(ir), context, prefix, nullptr);
    llvm::Module& m = *emitted.module;
    for (const std::string& stage : emitted.stages) {
      llvm::Function* body = m.getFunction(stage);
      llvm::FunctionType* type = body->getFunctionType();
      llvm::Function* grid = grid_stride(body);
      // The stage the runtime calls: for (t = 0; t < threads; ++t) the
      // grid's thread t, returning the first failure.
      llvm::Function* f = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, stage, m);
      llvm::Value* count = llvm::ConstantInt::get(llvm::Type::getInt64Ty(context), threads);
      first_failure_loop(
          f, [](llvm::IRBuilder<>& b) { return b.getInt64(0); }, count, llvm::ConstantInt::get(count->getType(), 1),
          [&](llvm::IRBuilder<>& b, llvm::Value* t) {
            return b.CreateCall(grid, {f->getArg(0), f->getArg(1), f->getArg(2), f->getArg(3), f->getArg(4), t, count});
          });
    }
    return emitted;
  });
}

Ref<Kernel> compile_gpu_schedule_for_host(const std::string& name, std::span<const te::Tensor> inputs,
                                          std::span<const te::Tensor> outputs, unsigned threads) {
  const KernelIR ir = lower_to_kernel_ir(name, inputs, outputs);
  HostCode host = gpu_schedule_host_code(ir, threads);
  return runtime::make_native_kernel(describe_native_kernel(ir, std::move(host.errors)), std::move(host.code));
}

void check_runs_on_gpu(const KernelIR& ir) {
  if (const std::string tensor = prologue_reads_elements(ir); !tensor.empty())
    throw_error(ErrorKind::not_supported,
                "not supported: {} on a GPU: its shapes or checks read the elements of {}, which would be on the "
                "device (the host computes them)",
                ir.name, tensor);
}

EmittedKernel emit_gpu_prologue(const KernelIR& ir, llvm::LLVMContext& context, const std::string& prefix) {
  // The stages' loops as the PTX has them, so that the schedule the prologue
  // computes is theirs; their error sites are the PTX's, in the same order.
  // The second word of a stage's schedule is its lanes an iteration, not its
  // work (which no thread pool reads here): what CudaStages sizes its grid by.
  KernelIR scheduled = schedule_for_gpu(ir);
  for (Stage& stage : scheduled.stages) stage.work = te::int_imm(stage.lanes);
  EmittedKernel emitted = emit_stages(scheduled, context, prefix, &kNvvmOps);
  for (const std::string& stage : emitted.stages) emitted.module->getFunction(stage)->eraseFromParent();
  emitted.stages.clear();
  return emitted;
}

namespace {

// What the disk cache keeps of a GPU kernel.
struct StoredCudaKernel {
  runtime::NativeKernelDesc desc;
  std::string ptx;
  std::string prologue_object;
};

// The GPU kernel of `ir` on `context`, entries named from `ptx_prefix`, the
// prologue's symbols from `host_prefix` (empty: unique); its PTX and the
// prologue's object into `stored` when that is set.
Ref<Kernel> build_cuda_kernel(const KernelIR& ir, std::shared_ptr<const cuda::Context> context,
                              const std::string& ptx_prefix, const std::string& host_prefix,
                              StoredCudaKernel* stored) {
  check_runs_on_gpu(ir);
  PtxKernel ptx = emit_ptx(ir, ptx_prefix, {context->compute_capability()});
  std::string object;
  HostCode host = compile_host_code(ir, emit_gpu_prologue, host_prefix, stored != nullptr ? &object : nullptr);
  runtime::NativeKernelDesc desc = describe_native_kernel(ir, std::move(ptx.errors));
  if (stored != nullptr) *stored = {desc, ptx.ptx, std::move(object)};
  return cuda::make_cuda_kernel(std::move(desc), std::move(host.code), ptx.ptx, ptx_prefix, std::move(context));
}

// A stored GPU kernel's payload: its description, its PTX, then the
// prologue's object file.
std::string payload_of(const StoredCudaKernel& k) {
  PayloadWriter w;
  runtime::write_desc(w, k.desc);
  w.str(k.ptx);
  w.bytes(k.prologue_object);
  return std::move(w).take();
}

// The kernel a payload holds, or null if it is malformed; throws if its
// object cannot be linked or the driver rejects its PTX.
Ref<Kernel> load_payload(std::string_view payload, const std::string& ptx_prefix, const std::string& host_prefix,
                         std::shared_ptr<const cuda::Context> context) {
  PayloadReader r(payload);
  std::optional<runtime::NativeKernelDesc> desc = runtime::read_desc(r);
  const std::string ptx = desc ? r.str() : std::string();
  const std::string_view object = r.rest();
  if (!desc || r.failed() || ptx.empty() || object.empty()) return {};
  runtime::NativeCode host = link_host_code(host_prefix, object, 0);
  return cuda::make_cuda_kernel(std::move(*desc), std::move(host), ptx, ptx_prefix, std::move(context));
}

}  // namespace

Ref<Kernel> compile_cuda_kernel(const std::string& name, std::span<const te::Tensor> inputs,
                                std::span<const te::Tensor> outputs, std::shared_ptr<const cuda::Context> context,
                                const std::string& symbol_prefix) {
  return build_cuda_kernel(lower_to_kernel_ir(name, inputs, outputs), std::move(context),
                           symbol_prefix.empty() ? unique_symbol_prefix() : symbol_prefix, {}, nullptr);
}

Ref<Kernel> cuda_kernel(const PrimitiveInfo& prim, const PrimitiveRule& rule, const Bucket& bucket,
                        std::shared_ptr<const cuda::Context> context, const KernelStore* store) {
  const auto start = std::chrono::steady_clock::now();
  const std::string bucket_text = bucket.dims.empty() ? std::string() : bucket.to_string();
  // The PTX is compiled for the device's SM, the prologue for the host.
  const std::string identity = kernel_identity(
      fmt::format("cuda kernel sm_{} host {}", context->compute_capability(), jit_target_id()), prim, bucket_text);
  const std::uint64_t key = kernel_key(identity);
  const std::string host_prefix = fmt::format("nimble_{:016x}", key);
  const std::string ptx_prefix = gpu_symbol_prefix(prim, bucket);
  if (Ref<Kernel> kernel = load_stored_kernel(store, key, identity, start, [&](std::string_view payload) {
        return load_payload(payload, ptx_prefix, host_prefix, context);
      }))
    return kernel;
  stats::begin_kernel_compile();  // a rejected entry's link is no phase of this compile
  KernelIR ir = lower_to_kernel_ir(prim.name, rule.inputs, rule.outputs);
  if (!bucket.dims.empty()) specialize(ir, bucket);
  StoredCudaKernel stored;
  Ref<Kernel> kernel = build_cuda_kernel(ir, std::move(context), ptx_prefix, host_prefix,
                                         store != nullptr ? &stored : nullptr);
  if (store != nullptr) (void)store->save(key, identity, payload_of(stored));
  stats::count_kernel_compiled(prim.name, bucket_text, stats::nanoseconds_since(start));
  return kernel;
}

std::string gpu_symbol_prefix(const PrimitiveInfo& prim, const Bucket& bucket) {
  std::string name = prim.name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (bucket.dims.empty()) return fmt::format("{}_{:016x}", name, prim.hash);
  // 32 bits of the bucket: each kernel is a module of its own, so a clash
  // would only make two kernels' names alike.
  return fmt::format("{}_{:016x}_b{:08x}", name, prim.hash, runtime::fnv1a(bucket.to_string()) & 0xffffffffu);
}

}  // namespace nimble::codegen
