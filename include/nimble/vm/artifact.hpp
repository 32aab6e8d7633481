// Running a model exported ahead of time (nimble::export_executable, in the
// compiler library) with the runtime library alone: no compiler, no LLVM.
#pragma once

#include <cstddef>
#include <string>

#include "nimble/vm/executable.hpp"

namespace nimble {

/// What load_artifact found in an artifact.
struct ArtifactInfo {
  std::string cpu_target;       ///< the kernel variant chosen for this CPU ("host", "x86-64-v3", "x86-64")
  std::size_t primitives = 0;   ///< primitive functions with kernels
  std::size_t kernels = 0;      ///< native kernels, generic and specialized
  std::size_t specialized = 0;  ///< of which specialized for a bucket
  std::size_t builtins = 0;     ///< primitives the runtime implements itself (stack)
  std::size_t gpu_kernels = 0;  ///< of the kernels, those of a GPU (PTX, loaded on first use)
  std::size_t file_bytes = 0;
};

/// Loads the artifact at `path`: checks its format, checksum and nimble
/// version, picks the first of its kernel variants whose CPU features this
/// CPU has, loads that variant's shared object (from memory: what was
/// checked is what runs) and hands its kernels to the process's KernelCache
/// through the "aot" provider — a call in a bucket it has no specialized
/// kernel for uses the generic one. Returns the Executable, for any number of
/// VirtualMachines on any threads. The provider keeps the kernels of every
/// artifact loaded (a primitive in two takes the later one's); kernels the
/// cache already holds for the same primitives stay in use until
/// KernelCache::clear(). Where the compiler library is linked too, its JIT
/// serves before the artifacts unless a VM asks for "aot"
/// (VirtualMachine::set_kernel_provider). Throws Error(parse_error) for a corrupt,
/// truncated or foreign file, Error(not_supported) for another version or a
/// CPU that lacks what every variant needs (naming the missing features),
/// Error(invalid_argument) for a file that cannot be read.
[[nodiscard]] vm::Executable load_artifact(const std::string& path, ArtifactInfo* info = nullptr);

}  // namespace nimble
