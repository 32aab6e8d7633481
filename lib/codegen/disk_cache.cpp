// The public view of the disk cache (include/nimble/disk_cache.hpp) over
// KernelStore.
#include "nimble/disk_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "codegen/kernel_store.hpp"
#include "nimble/error.hpp"
#include "support/check.hpp"

namespace nimble {
namespace {

// The store of `directory`, or none if it does not exist; an Error if the
// cache would refuse it.
std::optional<codegen::KernelStore> open_store(const std::string& directory) {
  if (directory.empty())
    throw_error(ErrorKind::invalid_argument, "disk cache: no directory given");
  struct stat st{};
  if (::lstat(directory.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;  // not made yet: an empty cache
    throw_error(ErrorKind::invalid_argument, "disk cache: cannot look at {}: {}", directory, std::strerror(errno));
  }
  if (!codegen::trusted_cache_directory(directory))
    throw_error(ErrorKind::invalid_argument,
                "disk cache: {} is not a directory the cache would use (expected a directory of "
                "user {}, not a symlink, writable by no one else)",
                directory, ::geteuid());
  return codegen::KernelStore(directory);
}

}  // namespace

std::vector<DiskCacheEntry> list_disk_cache(const std::string& directory) {
  std::vector<DiskCacheEntry> entries;
  const std::optional<codegen::KernelStore> store = open_store(directory);
  if (!store) return entries;
  for (const codegen::KernelStore::Entry& e : store->list())
    entries.push_back({e.path, e.bytes, e.mtime_ns, e.valid});
  return entries;
}

std::size_t remove_invalid_disk_cache_entries(const std::string& directory) {
  std::size_t removed = 0;
  for (const DiskCacheEntry& e : list_disk_cache(directory))
    if (!e.valid && ::unlink(e.path.c_str()) == 0) ++removed;
  return removed;
}

std::size_t clear_disk_cache(const std::string& directory) {
  const std::optional<codegen::KernelStore> store = open_store(directory);
  return store ? store->clear() : 0;
}

}  // namespace nimble
