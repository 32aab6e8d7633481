// The disk cache of compiled kernels: one file per kernel key in a directory
// (KernelCacheOptions::disk_cache_dir), shared by every process of the same
// nimble version on the same target. A file is
//
//   "NIMBLEKC"  u32 format  u32 identity size  u64 payload size
//   u64 checksum (FNV-1a 64 of identity and payload)  identity  payload
//
// The identity is everything the key was hashed from (nimble's version, the
// target, the primitive's kind and source, the bucket): an entry is used only
// if it is whole, its checksum holds and its identity is the one asked for,
// so a corrupt, truncated or foreign file (a hash collision, a copy from
// another machine) is never loaded — it is counted (EngineStats::
// disk_rejected) and the caller compiles and stores the kernel again.
// Entries are written to a temporary file and renamed into place, so a
// reader never sees half a file and concurrent writers of one key are safe.
// The directory is made private (0700); one that others can write is not
// used (trusted_cache_directory): its objects would run in this process.
// Not LLVM-specific: GPU kernels keep their PTX here too (gpu_kernel.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/payload.hpp"

namespace nimble::codegen {

class KernelStore {
 public:
  /// A store in `directory`, created on the first save.
  explicit KernelStore(std::string directory) : directory_(std::move(directory)) {}

  /// The payload stored under `key` with `identity`, or nullopt when there
  /// is none (a miss) or the entry is rejected. Counts the outcome in the
  /// EngineStats, except a hit: the caller counts it with its load time.
  [[nodiscard]] std::optional<std::string> load(std::uint64_t key, std::string_view identity) const;
  /// Stores `payload` under `key`. A cache: if the directory cannot be
  /// written the kernel is simply not kept (returns false).
  bool save(std::uint64_t key, std::string_view identity, std::string_view payload) const;

  /// The file of `key`: <directory>/<16 hex digits>.nkc
  [[nodiscard]] std::string path_of(std::uint64_t key) const;

 private:
  std::string directory_;
};

/// The key of a kernel: FNV-1a 64 of its identity.
[[nodiscard]] std::uint64_t kernel_key(std::string_view identity) noexcept;

/// The GNU build ID of the library this code is in (hex), which changes with
/// any change to the code that lowers, emits or calls kernels: part of every
/// identity, so that a rebuilt nimble never loads another build's objects.
/// Empty if the library has none (then the version alone separates builds).
[[nodiscard]] const std::string& library_build_id();

/// Whether `directory` may hold a disk cache: it does not exist yet (save
/// makes it, private to the user), or only its owner can write it — objects
/// from it become code in this process.
[[nodiscard]] bool trusted_cache_directory(const std::string& directory);

using runtime::PayloadReader;
using runtime::PayloadWriter;

}  // namespace nimble::codegen
