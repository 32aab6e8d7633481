// Compiling a module for the VM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/ir/module.hpp"
#include "nimble/runtime/device.hpp"
#include "nimble/vm/executable.hpp"

namespace nimble {

/// What compile made of a module, per function of the Executable (lifted
/// closures included). Counts are of call sites in the bytecode, not of
/// calls at run time.
struct CompileReport {
  /// A kernel that fusion made: its primitive's name and its ops, in order.
  struct FusedKernel {
    std::string name;
    std::vector<std::string> ops;
  };
  struct Function {
    std::string name;
    std::uint32_t kernels_unfused = 0;  ///< kernel call sites with one kernel per op
    std::uint32_t kernels = 0;          ///< kernel call sites as compiled
    std::uint32_t shape_functions = 0;  ///< shape-function call sites (CPU)
    std::vector<FusedKernel> fused;     ///< the fused kernels it calls, by first call site
    std::uint32_t static_allocations = 0;   ///< AllocStorage sites of constant size
    std::uint64_t static_bytes = 0;         ///< their bytes (the arenas included)
    std::uint32_t dynamic_allocations = 0;  ///< AllocStorage sites sized at run time
    /// The bytes of the arenas memory planning gave the function's static
    /// intermediates, one per stretch of code between calls (0: none
    /// planned), and the largest sum of those live at one point, which no
    /// placement can go below.
    std::uint64_t planned_peak_bytes = 0;
    std::uint64_t planned_lower_bound_bytes = 0;
  };
  std::vector<Function> functions;
  /// The fused program as a Graphviz digraph: per global function a cluster,
  /// a node per kernel or call, an edge per value passed.
  std::string dot;

  /// A markdown table of the functions, then each one's fused kernels.
  [[nodiscard]] std::string table() const;
};

struct CompileOptions {
  /// Constant folding, common subexpressions, exact algebraic identities,
  /// dead code (a run-time error of code whose result nothing reads may
  /// then not be raised); then a dense whose weight is a constant (and whose
  /// input has more than one row) becomes a matmul with the weight
  /// transposed once, at compile time (its sums then round in another order).
  bool simplify = true;
  /// Groups op calls into fused kernels (one launch each): elementwise and
  /// injective chains, reductions with their injective producers and
  /// consumers, dense / matmul with their elementwise epilogue; never across
  /// `if`, `match` or calls. Off: one kernel per op.
  bool fuse_ops = true;
  /// The intermediate buffers of static size that stay in a function share
  /// an arena per stretch of straight-line code between calls, placed by
  /// liveness over every control-flow path (one allocation per stretch
  /// instead of one per op). Off: every kernel output has its own allocation.
  bool plan_memory = true;
  /// Where kernels run: the CPU, or a GPU (Device::cuda(i): kernels
  /// compiled for it on first use, through NVPTX and the CUDA driver).
  /// place_devices gives every value a device and copies values that cross
  /// (scalar control and shapes stay on the CPU; dump_ir shows what it
  /// placed). An entry's tensor parameters come from the host; a kernel
  /// input the host passes already on the target is not copied again.
  Device target = Device::cpu();
  /// Where an entry function's result tensors are returned: the CPU (by
  /// default: copied back from the target, in a tuple too), or `target`:
  /// placed as any function's results are, by type — tensors on the target
  /// (no copy back; one made on the CPU is copied there), rank-0 integer and
  /// bool scalars on the CPU —, for a host that feeds them to the next call
  /// or moves them itself (Value::to). Results that hold target tensors in
  /// an ADT (a list, a tree) need this. Any other device:
  /// Error(invalid_argument).
  Device result_device = Device::cpu();
  /// Prints the module after each step of the pipeline to stderr: the IR
  /// after an IR pass, the bytecode listing after a bytecode step.
  bool dump_ir = false;
  /// Prints the module after the step of this name only (or "all": as
  /// dump_ir): infer_types, simplify, pretranspose_weights,
  /// split_to_slices, fuse_ops, place_devices, lower_to_bytecode,
  /// plan_memory, fuse_fresh_tensors, insert_kills, allocate_registers,
  /// link. A step that does not run (fuse_ops = false, a CPU target's
  /// place_devices) prints nothing; an unknown name is
  /// Error(invalid_argument). Empty: none.
  std::string dump_after;
  /// When set, compile fills it in (compiling a second time, unfused, to
  /// count the kernels fusion saved).
  CompileReport* report = nullptr;
};

/// Compiles a module (Builder::build's, or one parsed from text, which is
/// verified and typed first) to bytecode, in the steps listed at
/// CompileOptions::dump_after (lib/compiler/pipeline.cpp). The Executable runs on a
/// vm::VirtualMachine; its kernels come from the process's KernelCache, to
/// which this library adds its providers (the JIT first, the reference
/// kernels for what it cannot compile). Throws Error(not_supported) for
/// what the VM cannot run yet.
[[nodiscard]] vm::Executable compile(const ir::Module& module, const CompileOptions& options = {});

}  // namespace nimble
