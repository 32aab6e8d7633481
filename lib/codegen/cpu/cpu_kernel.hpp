// Compute rules compiled to machine code for the host CPU: the JIT's kernels.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "nimble/runtime/kernel.hpp"
#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/primitive_rule.hpp"
#include "ops/compute.hpp"
#include "runtime/native_kernel.hpp"

namespace nimble::codegen {

class KernelStore;
struct KernelIR;

/// Compiles the rule whose placeholders are `inputs` and whose results are
/// `outputs` to a Kernel that takes one tensor per input and writes one per
/// output (run_values flattens tuple inputs). A generic kernel: correct for
/// every shape its placeholders admit; it checks the dims its inputs and
/// outputs come with, and splits large stages across nimble's threads.
/// Counts the compilation in the engine stats under `name`. Throws
/// Error(not_supported) for a rule it cannot lower, Error(runtime_error)
/// when LLVM fails.
/// With `bucket`, a kernel specialized for it (see specialize(KernelIR&)).
[[nodiscard]] Ref<Kernel> compile_cpu_kernel(const std::string& name,
                                             std::span<const te::Tensor> inputs,
                                             std::span<const te::Tensor> outputs,
                                             const Bucket& bucket = {});

/// As compile_cpu_kernel (generic, not counted in the engine stats), emitted
/// with `options` instead of the host's: for tests of schedules this CPU
/// would not choose (vector loops below AVX-512, every flat stage as one).
[[nodiscard]] Ref<Kernel> compile_cpu_kernel_with(const std::string& name, std::span<const te::Tensor> inputs,
                                                  std::span<const te::Tensor> outputs,
                                                  const CpuEmitOptions& options);

/// What compile_host_code emits a kernel with: a module in `context`
/// defining the prologue and the stages kernel_emitter.hpp describes (those
/// EmittedKernel::stages lists), their symbols prefixed with `prefix`.
using HostKernelEmitter =
    std::function<EmittedKernel(const KernelIR& ir, llvm::LLVMContext& context, const std::string& prefix)>;

/// The emitter of the host CPU's kernels with `options` (emit_cpu_kernel).
[[nodiscard]] HostKernelEmitter cpu_kernel_emitter(const CpuEmitOptions& options);

/// A kernel's code for the host CPU, and the error sites its codes index.
struct HostCode {
  runtime::NativeCode code;
  std::vector<runtime::ErrorSite> errors;
};

/// The code `emit` makes of `ir`, compiled and linked by the JIT (not
/// counted in the engine stats): the host CPU's kernels, the GPU's schedule
/// run on the host, and the GPU kernels' host prologues
/// (codegen/cuda/gpu_kernel.hpp). Symbols named from `prefix` (empty: one
/// unique in the process); the object file into `object` if it is set.
[[nodiscard]] HostCode compile_host_code(const KernelIR& ir, const HostKernelEmitter& emit,
                                         const std::string& prefix = {}, std::string* object = nullptr);

/// An object compile_host_code wrote (with `prefix`, `num_stages` stages)
/// linked into the JIT. Throws Error(runtime_error) when it cannot be linked.
[[nodiscard]] runtime::NativeCode link_host_code(const std::string& prefix, std::string_view object,
                                                 std::uint32_t num_stages);

/// What a stored kernel of `prim` specialized for `bucket` (text; empty:
/// generic) is made from: this build of nimble (its code that lowers, emits
/// and calls kernels), its LLVM, `code` (the code generator and its target),
/// the primitive and the bucket. The disk cache's identity (kernel_store.hpp).
[[nodiscard]] std::string kernel_identity(std::string_view code, const PrimitiveInfo& prim, std::string_view bucket);

/// The kernel of primitive `prim`, whose rule is `rule`, specialized for
/// `bucket` (no dims: the generic kernel): loaded from `store` (the disk
/// cache; null: none) when it holds it — counted as a disk hit, not a
/// compilation — else compiled and stored there.
[[nodiscard]] Ref<Kernel> cpu_kernel(const PrimitiveInfo& prim, const PrimitiveRule& rule,
                                     const Bucket& bucket, const KernelStore* store);

/// The kernel `load` makes of the payload `store` (null: none) holds under
/// `key` and `identity`, counted as a disk hit loaded since `start`; null
/// when there is none, or when `load` returns null or throws (an entry that
/// cannot be used: counted as rejected, for the caller to replace).
[[nodiscard]] Ref<Kernel> load_stored_kernel(const KernelStore* store, std::uint64_t key, std::string_view identity,
                                             std::chrono::steady_clock::time_point start,
                                             const std::function<Ref<Kernel>(std::string_view payload)>& load);

/// What the runtime needs of `kernel` to call its code (emitted with `errors`).
[[nodiscard]] runtime::NativeKernelDesc describe_native_kernel(const KernelIR& kernel,
                                                               std::vector<runtime::ErrorSite> errors);

/// The kernel IR of that rule as text (for tests and debugging).
[[nodiscard]] std::string cpu_kernel_ir(const std::string& name, std::span<const te::Tensor> inputs,
                                        std::span<const te::Tensor> outputs);

/// A JIT provider, named "jit" (tests wrap one).
[[nodiscard]] std::shared_ptr<KernelProvider> make_jit_provider();

/// Adds the JIT ("jit", priority 0: before the reference kernels) to the
/// process's KernelCache; idempotent.
void register_jit_provider();

}  // namespace nimble::codegen
