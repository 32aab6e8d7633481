// A GPU kernel assembled from its parts: the PTX of its stages (entries
// <entry_prefix>_stage<k>, codegen/cuda/gpu_kernel.hpp), loaded into a
// device's context, and its prologue's host code. Both the JIT (compiled or
// from the disk cache) and the runtime (from an exported artifact, without
// LLVM) make their GPU kernels here.
#pragma once

#include <memory>
#include <string>

#include "nimble/runtime/kernel.hpp"
#include "runtime/cuda/context.hpp"
#include "runtime/native_kernel.hpp"

namespace nimble::cuda {

/// The kernel `desc` describes, its prologue `prologue` (no stages: those
/// run on the device) and its stages the entries of `ptx` on `context`.
/// Throws Error(runtime_error) when the driver rejects the PTX or lacks an
/// entry.
[[nodiscard]] Ref<Kernel> make_cuda_kernel(runtime::NativeKernelDesc desc, runtime::NativeCode prologue,
                                           const std::string& ptx, const std::string& entry_prefix,
                                           std::shared_ptr<const Context> context);

}  // namespace nimble::cuda
