// A kernel's host code: the module an emitter makes of kernel IR, compiled
// and linked into the process by the JIT (jit.hpp). Shared by both backends:
// the CPU's kernels are host code, and so are a GPU kernel's prologue and
// the GPU's schedule compiled for the host (codegen/cuda/gpu_kernel.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/llvm/kernel_emitter.hpp"
#include "runtime/native_kernel.hpp"

namespace llvm {
class LLVMContext;
}  // namespace llvm

namespace nimble::codegen {

struct KernelIR;

/// What compile_host_code emits a kernel with: a module in `context`
/// defining the prologue and the stages kernel_emitter.hpp describes (those
/// EmittedKernel::stages lists), their symbols prefixed with `prefix`.
using HostKernelEmitter =
    std::function<EmittedKernel(const KernelIR& ir, llvm::LLVMContext& context, const std::string& prefix)>;

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

/// What the runtime needs of `kernel` to call its code (emitted with `errors`).
[[nodiscard]] runtime::NativeKernelDesc describe_native_kernel(const KernelIR& kernel,
                                                               std::vector<runtime::ErrorSite> errors);

}  // namespace nimble::codegen
