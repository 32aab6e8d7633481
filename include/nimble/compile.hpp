// Compiling a module for the VM.
#pragma once

#include "nimble/ir/module.hpp"
#include "nimble/vm/executable.hpp"

namespace nimble {

struct CompileOptions {
  /// Groups op calls into fused kernels (one launch each): elementwise and
  /// injective chains, reductions with their injective producers and
  /// consumers, dense / matmul with their elementwise epilogue; never across
  /// `if`, `match` or calls. Off: one kernel per op.
  bool fuse_ops = true;
  /// Per function, the intermediate buffers of static size that stay in the
  /// function share one arena allocated on entry, placed by liveness over
  /// every control-flow path (one allocation per call instead of one per
  /// op). Off: every kernel output has its own allocation.
  bool plan_memory = true;
  // Later issues add: buckets, targets.
};

/// Compiles a type-checked module (Builder::build, or ir::verify and
/// ir::infer_types) to bytecode. The Executable runs on a
/// vm::VirtualMachine; its kernels come from the process's KernelCache, to
/// which this library adds its providers (today: the reference kernels).
/// Throws Error(not_supported) for what the VM cannot run yet.
[[nodiscard]] vm::Executable compile(const ir::Module& module, const CompileOptions& options = {});

}  // namespace nimble
