// Ahead-of-time export: an Executable with every kernel it calls compiled
// for the CPUs (and GPUs) it will run on, in one file that nimble::load_artifact (the
// runtime library alone) runs — where there is no compiler and no LLVM.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nimble/runtime/bucket.hpp"
#include "nimble/vm/executable.hpp"

namespace nimble {

/// A bucket to export a specialized kernel for: of the primitive function
/// called `primitive` (its name in the Executable, e.g. "fused_dense_add_0").
struct ExportBucket {
  std::string primitive;
  Bucket bucket;
};

struct ExportOptions {
  /// The CPU variants to compile every kernel for, best first: the runtime
  /// runs the first one whose features its CPU has. "host": what the JIT
  /// compiles here, bit for bit (the exported model computes exactly what
  /// the JIT-run one does); "x86-64-v4", "x86-64-v3", "x86-64-v2" and
  /// "x86-64": the x86-64 micro-architecture levels, portable to any CPU
  /// of that level.
  std::vector<std::string> cpu_targets = {"host"};
  /// The GPUs a program compiled for one (CompileOptions::target cuda:n)
  /// runs on: each GPU kernel's PTX for each ("sm_80", "sm_86", "sm_87",
  /// "sm_89", "sm_90"); the runtime loads the highest a device has, which
  /// its driver compiles for it. Its prologue, host code, is in the CPU
  /// variants. Unused for a program that runs on the CPU only.
  std::vector<std::string> cuda_targets = {"sm_80", "sm_90"};
  /// Also a specialized kernel for every bucket the process's KernelCache
  /// has specialized the primitive for so far (run the model on typical
  /// inputs before exporting).
  bool seen_buckets = true;
  /// And these.
  std::vector<ExportBucket> buckets;
  /// The linker that makes the shared object of each variant; empty:
  /// ld.lld, else ld, from PATH. (Only exporting needs one.)
  std::string linker;
};

/// What an export wrote.
struct ExportReport {
  std::size_t primitives = 0;
  std::size_t kernels = 0;      ///< native kernels per variant, generic and specialized
  std::size_t specialized = 0;  ///< of which specialized for a bucket
  std::size_t builtins = 0;     ///< primitives the runtime implements itself (stack)
  std::size_t gpu_kernels = 0;  ///< of the kernels, those with PTX (one per cuda target)
  std::size_t variants = 0;
  std::size_t bytes = 0;        ///< the artifact's size
  double seconds = 0;           ///< compiling and linking
};

/// Writes `executable` and its kernels to `path` (replacing it atomically).
/// Throws Error(not_supported) naming a primitive nimble cannot compile
/// ahead of time, Error(invalid_argument) for an unknown CPU or CUDA target
/// or bucket, Error(runtime_error) if compiling or linking fails.
ExportReport export_executable(const vm::Executable& executable, const std::string& path,
                               const ExportOptions& options = {});

}  // namespace nimble
