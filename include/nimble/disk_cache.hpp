// The disk cache of compiled kernels (KernelCacheOptions::disk_cache_dir),
// for tools and hosts that manage it: list and verify its entries, or clear
// it. The cache itself needs none of this: it checks every entry before use
// and evicts the least recently used past its size limit.
//
// Thread safety: safe to call at any time, also while other threads or
// processes use the cache (an entry removed under a running process is
// compiled again there when next needed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nimble {

/// One file of the disk cache.
struct DiskCacheEntry {
  std::string path;
  std::uint64_t bytes = 0;
  std::int64_t last_used_ns = 0;  ///< since the epoch: when last stored or loaded
  /// The file is the user's, writable by no one else, whole, of this
  /// nimble's format, and its MAC holds under the directory's secret.
  /// An entry written by another nimble build is valid here and simply
  /// never matches a key of this one (it ages out).
  bool valid = false;
};

/// The entries of the disk cache in `directory`, least recently used
/// first, each verified as the cache would before loading it (no code is
/// loaded). Empty if the directory does not exist. Throws
/// Error(invalid_argument) if it exists but is not a directory the cache
/// would use (a symlink, another user's, writable by others).
[[nodiscard]] std::vector<DiskCacheEntry> list_disk_cache(const std::string& directory);

/// Removes the entries that are not valid; returns how many.
/// Throws as list_disk_cache.
std::size_t remove_invalid_disk_cache_entries(const std::string& directory);

/// Removes every entry, unfinished writes and the secret (so that the next
/// store makes a new one); returns how many files it removed. Throws as
/// list_disk_cache.
std::size_t clear_disk_cache(const std::string& directory);

}  // namespace nimble
