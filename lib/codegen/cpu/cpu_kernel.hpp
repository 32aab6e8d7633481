// Compute rules compiled to machine code for the host CPU: the JIT's kernels.
#pragma once

#include <span>
#include <string>

#include "nimble/runtime/kernel.hpp"
#include "codegen/llvm/host_code.hpp"
#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/primitive_rule.hpp"
#include "ops/compute.hpp"

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

/// The emitter of the host CPU's kernels with `options` (emit_cpu_kernel).
[[nodiscard]] HostKernelEmitter cpu_kernel_emitter(const CpuEmitOptions& options);

/// The kernel of primitive `prim`, whose rule is `rule`, specialized for
/// `bucket` (no dims: the generic kernel): loaded from `store` (the disk
/// cache; null: none) when it holds it — counted as a disk hit, not a
/// compilation — else compiled and stored there.
[[nodiscard]] Ref<Kernel> cpu_kernel(const PrimitiveInfo& prim, const PrimitiveRule& rule,
                                     const Bucket& bucket, const KernelStore* store);

/// The kernel IR of that rule as text (for tests and debugging).
[[nodiscard]] std::string cpu_kernel_ir(const std::string& name, std::span<const te::Tensor> inputs,
                                        std::span<const te::Tensor> outputs);

}  // namespace nimble::codegen
