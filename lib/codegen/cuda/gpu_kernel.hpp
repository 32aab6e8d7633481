// The GPU's kernels: kernel IR → LLVM IR → PTX through LLVM's NVPTX backend.
//
// Each stage is first scheduled for the GPU (gpu_schedule.hpp: a thread an
// element, a warp an element for reductions along rows), then runs as a
// grid sharing its outer loop: thread t of T takes the iterations
// begin + t, begin + t + T, … below end (a grid-stride loop), each the
// stage's plain loop nest for that one iteration — the code the CPU emitter
// makes with CpuEmitOptions::register_tiles off, the transcendentals its own
// expansions (no libdevice). In a stage of 32 lanes an iteration the
// grid-stride loop's threads are warps (thread / 32 of T / 32) and each
// reduction of the element is split across the warp's lanes (shuffles;
// CpuEmitOptions::gpu). Per stage k the PTX has
//
//   .entry <prefix>_stage<k>(.param .u64 data, .param .u64 dims, .param .u64 info,
//                            .param .u64 status, .param .u64 begin, .param .u64 end)
//
// data, dims and info as kernel_emitter.hpp has them, in device memory;
// status: an i32 in device memory, 0 before the launch, where the first
// failing iteration to get there leaves its code (1 + the index of its
// ErrorSite; info then holds a failing iteration's values). The prologue
// (bindings, dim checks, the schedule) reads shapes only: it runs on the
// host. Its schedule gives per stage the iterations and, where the CPU's
// has the stage's work, the threads an iteration takes (1, or 32 for a
// warp): what the runtime sizes the grid by (any grid computes every
// iteration).
//
// Products are a thread (batch_matmul) or a warp (dense) an element for
// now; shared-memory tiles are the next step.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "codegen/llvm/host_code.hpp"
#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/primitive_rule.hpp"
#include "nimble/runtime/kernel.hpp"
#include "ops/compute.hpp"
#include "runtime/cuda/context.hpp"
#include "runtime/native_kernel.hpp"

namespace nimble::codegen {

class KernelStore;
struct KernelIR;

/// The GPU code is generated for.
struct CudaTarget {
  int compute_capability = 90;  ///< sm_80 → 80, sm_90 → 90

  /// The PTX ISA version LLVM writes for it (the lowest that has the SM).
  /// Throws Error(not_supported) for an SM nimble does not target.
  [[nodiscard]] int ptx_version() const;
};

struct PtxKernel {
  std::string ptx;                          ///< the module's PTX text
  std::vector<std::string> entries;         ///< one .entry per stage, in order
  std::vector<runtime::ErrorSite> errors;   ///< status code k > 0 is errors[k - 1]
};

/// The PTX of `kernel`'s stages for `target`, entries named from `symbol_prefix`.
/// Throws Error(runtime_error) when LLVM fails.
[[nodiscard]] PtxKernel emit_ptx(const KernelIR& kernel, const std::string& symbol_prefix,
                                 const CudaTarget& target);

/// The PTX of the rule whose placeholders are `inputs` and results `outputs`
/// (lowered as compile_cpu_kernel does).
[[nodiscard]] PtxKernel gpu_kernel_ptx(const std::string& name, std::span<const te::Tensor> inputs,
                                       std::span<const te::Tensor> outputs, const CudaTarget& target);

/// The same rule with the GPU's schedule compiled for the host CPU: each
/// stage's grid of `threads` threads (≥ 1; warps in a stage of lanes, each
/// running its lanes itself and exchanging through memory in the GPU's
/// order) run one after another over the iterations the runtime gives the
/// stage. What the GPU's stages compute, checked on machines without one.
[[nodiscard]] Ref<Kernel> compile_gpu_schedule_for_host(const std::string& name,
                                                        std::span<const te::Tensor> inputs,
                                                        std::span<const te::Tensor> outputs, unsigned threads);

/// The GPU's schedule of `ir` compiled for the host (the code
/// compile_gpu_schedule_for_host runs): stage k runs the grid's `threads`
/// threads one after another. For a fake driver to run launches with.
[[nodiscard]] HostCode gpu_schedule_host_code(const KernelIR& ir, unsigned threads);

/// Throws Error(not_supported) if `ir` cannot run on a GPU: its prologue,
/// which runs on the host, would read elements of a tensor (on the device).
void check_runs_on_gpu(const KernelIR& ir);

/// A GPU kernel's host code: the module of emit_ptx's emitter with the
/// prologue only (EmittedKernel::stages empty; its errors are the PTX's).
[[nodiscard]] EmittedKernel emit_gpu_prologue(const KernelIR& ir, llvm::LLVMContext& context,
                                              const std::string& prefix);

/// The rule as a kernel on the GPU of `context`: its PTX loaded there, its
/// prologue compiled for the host, each stage launched on the device
/// (cuda::CudaStages). Its tensors, and the temporaries it allocates, are on
/// that device (allocator_for(Device::cuda(ordinal)) gives its memory). The
/// PTX entries are <symbol_prefix>_stage<k>; by default a prefix unique in
/// the process.
[[nodiscard]] Ref<Kernel> compile_cuda_kernel(const std::string& name, std::span<const te::Tensor> inputs,
                                              std::span<const te::Tensor> outputs,
                                              std::shared_ptr<const cuda::Context> context,
                                              const std::string& symbol_prefix = {});

/// The GPU kernel of primitive `prim` (whose rule is `rule`) on `context`'s
/// device, specialized for `bucket` (no dims: generic; see specialize(
/// KernelIR&)), its entries named by gpu_symbol_prefix(prim, bucket): loaded from `store`
/// (the disk cache; null: none) when it holds it — the PTX for the device's
/// SM and the prologue's host object, counted as a disk hit — else compiled
/// (counted) and stored there. An entry the driver or the JIT rejects is
/// counted as rejected and replaced.
[[nodiscard]] Ref<Kernel> cuda_kernel(const PrimitiveInfo& prim, const PrimitiveRule& rule, const Bucket& bucket,
                                      std::shared_ptr<const cuda::Context> context, const KernelStore* store);

/// The symbol prefix of `prim`'s GPU kernel: its name and content hash
/// ("fused_dense_add_0_1f2e…"), the same in every process, so that profilers
/// and logs name kernels as nimble's messages do.
/// A kernel specialized for `bucket` adds "_b" and 8 hex digits of it.
[[nodiscard]] std::string gpu_symbol_prefix(const PrimitiveInfo& prim, const Bucket& bucket = {});

}  // namespace nimble::codegen
