// The file an export writes (nimble::export_executable) and the runtime
// loads (nimble::load_artifact): one artifact holds a model whole.
//
//   "NIMBLEAR"  u32 format  u32 0  u64 body size  u64 checksum (FNV-1a 64 of the body)
//   body:
//     str  nimble version that wrote it (the runtime loads only its own: the
//          kernels' calling convention is the version's)
//     str  LLVM version that compiled its code (a record, for tools and bug
//          reports: the shared objects need no LLVM to load)
//     blob the Executable (its own format, verified by Executable::load)
//     per primitive: hash, name, kind, and either a built-in op the runtime
//          implements (name, integer attributes) or its native kernels: the
//          generic one first, then one per specialized bucket, each with its
//          symbol prefix and NativeKernelDesc, and for a kernel of a GPU its
//          PTX per compute capability (entries <prefix>_stage<k>; the shared
//          objects hold its prologue only)
//     per CPU variant, best first: target name, LLVM CPU, the CPU features
//          its code needs, and a shared object with every kernel's symbols
//
// Reading checks the header, the checksum and every field's range, so a
// corrupt or truncated file is an Error(parse_error), never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nimble/runtime/bucket.hpp"
#include "nimble/runtime/kernel.hpp"
#include "runtime/native_kernel.hpp"

namespace nimble::runtime::artifact {

inline constexpr std::uint32_t kFormat = 3;  // 3: the LLVM version

/// A GPU kernel's stages for GPUs of `compute_capability` (80: sm_80) and later.
struct Ptx {
  std::uint32_t compute_capability = 0;
  std::string text;
};

struct KernelEntry {
  Bucket bucket;  ///< no dims: the generic kernel
  std::string symbol_prefix;
  NativeKernelDesc desc;
  std::vector<Ptx> ptx;  ///< empty: a CPU kernel; ascending compute capability
};

struct PrimitiveEntry {
  std::uint64_t hash = 0;
  std::string name;
  PrimitiveKind kind = PrimitiveKind::compute;
  std::string builtin;  ///< non-empty: an op the runtime implements
  std::vector<std::int64_t> builtin_attrs;
  std::vector<KernelEntry> kernels;  ///< empty for a built-in
};

struct Variant {
  std::string target;  ///< "host", "x86-64-v3", ...
  std::string cpu;     ///< the LLVM CPU its code was compiled for
  std::vector<std::string> required_features;  ///< LLVM names, as cpu_features.hpp reports them
  std::string shared_object;
};

struct Contents {
  std::string nimble_version;
  std::string llvm_version;
  std::string executable;
  std::vector<PrimitiveEntry> primitives;
  std::vector<Variant> variants;
};

/// The file's bytes.
[[nodiscard]] std::string write(const Contents& contents);
/// The contents of `file` (read from `path`, for messages). Throws
/// Error(parse_error) for a file that is not an artifact, is truncated or
/// corrupt, or has another format; Error(not_supported) for one written by
/// another nimble version.
[[nodiscard]] Contents read(std::string_view file, const std::string& path);

}  // namespace nimble::runtime::artifact
