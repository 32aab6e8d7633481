// The disk cache of compiled kernels: one file per kernel key in a directory
// (KernelCacheOptions::disk_cache_dir), shared by every process of the same
// nimble version on the same target. A file is
//
//   "NIMBLEKC"  u32 format  u32 identity size  u64 payload size
//   u8[32] MAC  identity  payload
//
// where MAC is HMAC-SHA256, under the directory's secret (<dir>/secret, 32
// random bytes, mode 0600, made by the first store), of the first 24 bytes,
// the identity and the payload. The identity is everything the key was
// hashed from (nimble's version and build, the target and its CPU features,
// the primitive's kind and source, the bucket). An entry is used only if
// its file is a regular file (no symlink followed) of the expected owner
// that no one else can write (checked with fstat on the opened file), it is
// whole, its MAC holds and its identity is the one asked for: so a corrupt,
// truncated, foreign or forged file — even one whose MAC an attacker
// recomputed without the secret — is never loaded; it is counted
// (EngineStats::disk_rejected) and the caller compiles and stores the kernel
// again. Entries are written to a temporary file and renamed into place, so
// a reader never sees half a file and concurrent writers of one key are
// safe. A store past the size limit removes the least recently used entries
// (a hit touches its file's mtime). The directory is made private (0700);
// one that others can write, or not the user's, is not used
// (trusted_cache_directory): its objects would run in this process.
// Not LLVM-specific: GPU kernels keep their PTX here too (gpu_kernel.hpp).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/payload.hpp"

namespace nimble::codegen {

class KernelStore {
 public:
  /// A store in `directory`, created on the first save, whose files must be
  /// owned by `owner` (the running user; tests inject another) and hold at
  /// most `max_bytes` of entries.
  explicit KernelStore(std::string directory, std::uint64_t max_bytes = std::uint64_t{1} << 30,
                       uid_t owner = ::geteuid())
      : directory_(std::move(directory)), max_bytes_(max_bytes), owner_(owner) {}

  /// The payload stored under `key` with `identity`, or nullopt when there
  /// is none (a miss) or the entry is rejected. Counts the outcome in the
  /// EngineStats, except a hit: the caller counts it with its load time.
  [[nodiscard]] std::optional<std::string> load(std::uint64_t key, std::string_view identity) const;
  /// Stores `payload` under `key`, then evicts past the size limit. A
  /// cache: if the directory cannot be written the kernel is simply not kept
  /// (returns false).
  bool save(std::uint64_t key, std::string_view identity, std::string_view payload) const;

  /// The file of `key`: <directory>/<16 hex digits>.nkc
  [[nodiscard]] std::string path_of(std::uint64_t key) const;

  /// One entry, as list() sees it.
  struct Entry {
    std::string path;
    std::uint64_t bytes = 0;
    std::int64_t mtime_ns = 0;  ///< last stored or used
    bool valid = false;         ///< owner, mode, format and MAC hold
  };
  /// The entries (*.nkc), least recently used first, each verified.
  [[nodiscard]] std::vector<Entry> list() const;
  /// Removes every entry and the secret; returns the number of files removed.
  std::size_t clear() const;

 private:
  [[nodiscard]] std::optional<std::string> read_secret() const;
  [[nodiscard]] std::optional<std::string> secret_for_writing() const;
  // The entry's identity and payload, after every check; its identity's
  // size in `identity_bytes`; whether there is no such file in `absent`.
  // Counts nothing (load counts; list only looks).
  [[nodiscard]] std::optional<std::string> read_entry(const std::string& path, bool touch,
                                                    std::uint64_t* identity_bytes = nullptr,
                                                    bool* absent = nullptr) const;
  void evict() const;

  std::string directory_;
  std::uint64_t max_bytes_;
  uid_t owner_;
};

/// The key of a kernel: FNV-1a 64 of its identity.
[[nodiscard]] std::uint64_t kernel_key(std::string_view identity) noexcept;

/// The GNU build ID of the library this code is in (hex), which changes with
/// any change to the code that lowers, emits or calls kernels: part of every
/// identity, so that a rebuilt nimble never loads another build's objects.
/// Empty if the library has none (then the version alone separates builds).
[[nodiscard]] const std::string& library_build_id();

/// Whether `directory` may hold a disk cache: it does not exist yet (save
/// makes it, private to the user), or it is a directory (not a symlink) of
/// `owner` that no one else can write — objects from it become code in this
/// process. Warns once on stderr when it may not.
[[nodiscard]] bool trusted_cache_directory(const std::string& directory, uid_t owner = ::geteuid());

using runtime::PayloadReader;
using runtime::PayloadWriter;

}  // namespace nimble::codegen
