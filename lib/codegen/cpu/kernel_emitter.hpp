// Kernel IR → LLVM IR for the host CPU. A kernel becomes one prologue and one
// function per stage, all `extern "C"`-callable:
//
//   i32 <sym>_prologue(ptr data, ptr dims, ptr info, ptr sched)
//   i32 <sym>_stage<k>(ptr data, ptr dims, ptr info, i64 begin, i64 end)
//
// data:  one pointer per buffer (inputs, outputs, then temporaries);
// dims:  one `const i64*` per input and output buffer (its shape);
// info:  four i64 a failure leaves its values in (an index, an extent ...);
// sched: the prologue's results: per stage its outer extent and its work,
//        then per temporary its element count (the caller allocates it).
//
// The prologue binds the shape Vars, checks the input and output dims and
// the rules' Checks; stage k computes its buffer for outer iterations
// [begin, end), so that the caller can split it across threads. Each returns
// 0, or 1 + the index of the ErrorSite that failed. Nothing traps: integer
// division by zero, INT_MIN / -1 and out-of-range data indices are tested.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_ir.hpp"
#include "runtime/native_kernel.hpp"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace nimble::codegen {

using runtime::ErrorSite;

struct EmittedKernel {
  std::unique_ptr<llvm::Module> module;
  std::string prologue;             ///< symbol names
  std::vector<std::string> stages;  ///< one per KernelIR stage
  std::vector<ErrorSite> errors;    ///< code k > 0 is errors[k - 1]
};

/// What the code is emitted for.
struct CpuEmitOptions {
  /// The widest vector registers of the target CPU (128 SSE, 256 AVX, 512
  /// AVX-512): the width of explicitly vectorized code (dot-product tiles).
  unsigned vector_bits = 256;
  /// Dot- and outer-product stages as register tiles (dot_product.hpp); off,
  /// every stage is its plain loop nest, as the GPU's stages are (one
  /// iteration of the outer loop per thread: codegen/cuda/gpu_kernel.hpp).
  bool register_tiles = true;
};

/// Emits `kernel` into a new module of `context`, its symbols prefixed with
/// `symbol_prefix` (unique per process).
[[nodiscard]] EmittedKernel emit_cpu_kernel(const KernelIR& kernel, llvm::LLVMContext& context,
                                            const std::string& symbol_prefix, const CpuEmitOptions& options);

}  // namespace nimble::codegen
