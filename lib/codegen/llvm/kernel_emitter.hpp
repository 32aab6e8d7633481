// Kernel IR → LLVM IR for the host CPU. A kernel becomes one prologue and one
// function per stage, all `extern "C"`-callable:
//
//   i32 <sym>_prologue(ptr data, ptr dims, ptr info, ptr sched)
//   i32 <sym>_stage<k>(ptr data, ptr dims, ptr info, i64 begin, i64 end)
//
// data:  one pointer per buffer (inputs, outputs, then temporaries);
// dims:  one `const i64*` per input and output buffer (its shape);
// info:  four i64 a failure leaves its values in (an index, an extent ...);
// sched: the prologue's results: per stage the extent of its range and its
//        work, then per temporary its element count (the caller allocates
//        it). The range is of the stage's outer loop, or of a dot product's
//        columns in whole tiles (split_range).
//
// The prologue binds the shape Vars, checks the input and output dims and
// the rules' Checks; stage k computes its buffer for [begin, end) of that
// range, so that the caller can split it across threads. Each returns
// 0, or 1 + the index of the ErrorSite that failed. Nothing traps: integer
// division by zero, INT_MIN / -1 and out-of-range data indices are tested.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_ir.hpp"
#include "runtime/native_kernel.hpp"

namespace llvm {
class IRBuilderBase;
class LLVMContext;
class Module;
class Type;
class Value;
}  // namespace llvm

namespace nimble::codegen {

using runtime::ErrorSite;

/// The function attribute of a stage emitted as explicit vector code (dot-
/// and outer-product tiles, vector loops): the JIT gives it the IR pipeline
/// without LLVM's loop vectorizer (kExplicitVectorsPipeline, jit.cpp), which
/// finds nothing left to do there.
inline constexpr const char* kExplicitVectorsAttribute = "nimble-explicit-vectors";

struct EmittedKernel {
  std::unique_ptr<llvm::Module> module;
  std::string prologue;             ///< symbol names
  std::vector<std::string> stages;  ///< one per KernelIR stage
  std::vector<ErrorSite> errors;    ///< code k > 0 is errors[k - 1]
};

/// What the threads of a GPU stage computed by several threads an iteration
/// (Stage::lanes > 1: a warp's lanes, or a block's threads) use to work
/// together. The emitter asks for them only there.
class GpuOps {
 public:
  virtual ~GpuOps() = default;
  /// This thread's lane in its warp: an i64 in [0, 32).
  [[nodiscard]] virtual llvm::Value* lane(llvm::IRBuilderBase& b) const = 0;
  /// The i32 `value` of the lane whose index is this lane's xor `mask`
  /// (every lane of the warp calls it together).
  [[nodiscard]] virtual llvm::Value* exchange(llvm::IRBuilderBase& b, llvm::Value* value, unsigned mask) const = 0;
  /// This thread's index in its block: an i64 in [0, block size).
  [[nodiscard]] virtual llvm::Value* thread(llvm::IRBuilderBase& b) const = 0;
  /// Waits until every thread of the block got here; what they wrote to
  /// shared memory before is visible after.
  virtual void barrier(llvm::IRBuilderBase& b) const = 0;
  /// A pointer (generic address space) to `count` elements of `type` in the
  /// block's shared memory, a new array each call, named `name`.
  [[nodiscard]] virtual llvm::Value* shared_array(llvm::IRBuilderBase& b, llvm::Type* type, unsigned count,
                                                  const char* name) const = 0;
};

/// A dot-product stage (dot_product.hpp) scheduled for a GPU in shared-
/// memory tiles (Stage::product_tiles): a block of kThreads threads computes
/// a tile of kRows × kCols elements of one batch, staging kDepth steps of k
/// of a's rows and b's rows in shared memory at a time; thread (y, x) of the
/// 16 × 16 sums rows y, y + 16, … and columns x, x + 16, … of it.
struct GpuProductTile {
  static constexpr int kRows = 64;
  static constexpr int kCols = 64;
  static constexpr int kDepth = 16;
  static constexpr int kSide = 16;  ///< threads along rows and along columns
  static constexpr int kThreads = kSide * kSide;
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
  /// Flat element-wise stages (one loop over contiguous elements) emitted as
  /// one explicit vector loop of vector_bits / 32 lanes whose last partial
  /// vector is a masked iteration of the same body, instead of a scalar loop
  /// that LLVM's vectorizer widens and keeps a scalar copy of (for the
  /// remainder): half the IR, so about half the code generation time of such
  /// a stage. Off, they are scalar loops for LLVM's vectorizer. On, a
  /// floating sum, max or min along a row is explicit vectors too, its last
  /// partial vector masked (softmax's and layer_norm's rows).
  bool vector_loops = false;
  /// The smallest body (about as many LLVM instructions) a vector loop is
  /// emitted for: smaller ones go to LLVM's vectorizer, which interleaves
  /// them (several vectors an iteration) and whose scalar copy of them is
  /// cheap to compile (x + y on 16384 floats: 1.77 us so, 2.03 us as one
  /// vector an iteration); from it up, one copy of the body saves more
  /// compile time (a fused LSTM cell: 7.0 -> 3.8 ms) and the body's own work
  /// hides the loop's (sigmoid on 16384 floats: 8.3 -> 6.5 us). 0: every
  /// flat element-wise stage (tests).
  int vector_loop_min_size = 24;
  /// The target is x86 with AVX-512: the math expansions of 512-bit vectors
  /// may use its instructions (math.hpp's kX86Avx512Flag).
  bool x86_avx512 = false;
  /// A stage of several lanes (Stage::lanes > 1: a warp's 32, or a block's
  /// threads) splits each reduction of its element across them
  /// (codegen/cuda/gpu_schedule.hpp): lane l folds the reduction's elements
  /// l, l + lanes, … in row-major order (its axes flattened; the first lane
  /// starts from the init, the others from the fold's identity), the lanes'
  /// partials combine in a butterfly in each warp (offsets 16, …, 1: each
  /// lane folds its partial with its partner's), a block's warps' sums then
  /// in order through shared memory, and lane 0 stores; a stage of product
  /// tiles runs GpuProductTile's schedule.
  /// With `gpu` the threads are a GPU's; null, the host runs every thread of
  /// an iteration itself — each step between two barriers (or exchanges) for
  /// all threads, one after another, their private values and the block's
  /// shared memory in arrays — the same operations in the same order, so the
  /// GPU's arithmetic and indexing can be checked on machines without one.
  const GpuOps* gpu = nullptr;

  /// The options for an x86 CPU whose vector registers are `vector_bits`
  /// wide (512: AVX-512):
  /// vector loops from AVX-512 up, where masked loads and stores cost what
  /// plain ones do (below it, AVX's masked stores are slow on some CPUs:
  /// LLVM's vectorizer and its scalar remainder stay).
  [[nodiscard]] static CpuEmitOptions for_vector_bits(unsigned bits) {
    return {.vector_bits = bits, .register_tiles = true, .vector_loops = bits >= 512, .x86_avx512 = bits >= 512};
  }
};

/// Emits `kernel` into a new module of `context`, its symbols prefixed with
/// `symbol_prefix` (unique per process).
[[nodiscard]] EmittedKernel emit_cpu_kernel(const KernelIR& kernel, llvm::LLVMContext& context,
                                            const std::string& symbol_prefix, const CpuEmitOptions& options);

}  // namespace nimble::codegen
