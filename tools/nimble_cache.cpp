// nimble-cache: lists, verifies and clears the disk cache of compiled
// kernels (include/nimble/disk_cache.hpp).
//
//   nimble-cache [--dir DIR] list      every entry: size, last use, valid or not
//   nimble-cache [--dir DIR] verify    exit 1 if any entry is invalid
//   nimble-cache [--dir DIR] prune     remove the invalid entries
//   nimble-cache [--dir DIR] clear     remove every entry and the secret
//
// DIR defaults to the cache the library uses ($NIMBLE_CACHE_DIR, else
// $XDG_CACHE_HOME/nimble, else ~/.cache/nimble).
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>

#include "nimble/disk_cache.hpp"
#include "nimble/error.hpp"
#include "nimble/runtime/kernel.hpp"

namespace {

int usage() {
  std::fputs("usage: nimble-cache [--dir DIR] list|verify|prune|clear\n", stderr);
  return 2;
}

std::string local_time(std::int64_t ns) {
  const std::time_t seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  char text[32] = "?";
  if (::localtime_r(&seconds, &tm) != nullptr) std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

int list(const std::string& dir, bool verbose) {
  const auto entries = nimble::list_disk_cache(dir);
  std::uint64_t bytes = 0;
  std::size_t invalid = 0;
  for (const nimble::DiskCacheEntry& e : entries) {
    bytes += e.bytes;
    invalid += e.valid ? 0 : 1;
    if (verbose || !e.valid)
      std::printf("%-7s %10llu  %s  %s\n", e.valid ? "ok" : "INVALID",
                  static_cast<unsigned long long>(e.bytes), local_time(e.last_used_ns).c_str(), e.path.c_str());
  }
  std::printf("%s: %zu entries, %llu bytes, %zu invalid\n", dir.c_str(), entries.size(),
              static_cast<unsigned long long>(bytes), invalid);
  return invalid == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = nimble::KernelCacheOptions::default_disk_cache_dir();
  int i = 1;
  if (i + 1 < argc && std::string_view(argv[i]) == "--dir") {
    dir = argv[i + 1];
    i += 2;
  }
  if (i + 1 != argc) return usage();
  const std::string_view command = argv[i];
  if (dir.empty()) {
    std::fputs("nimble-cache: the disk cache is off ($NIMBLE_CACHE_DIR is \"off\" or empty, and no --dir)\n",
               stderr);
    return 2;
  }
  try {
    if (command == "list") {
      (void)list(dir, true);
      return 0;
    }
    if (command == "verify") return list(dir, false);
    if (command == "prune") {
      std::printf("%s: removed %zu invalid entries\n", dir.c_str(), nimble::remove_invalid_disk_cache_entries(dir));
      return 0;
    }
    if (command == "clear") {
      std::printf("%s: removed %zu files\n", dir.c_str(), nimble::clear_disk_cache(dir));
      return 0;
    }
  } catch (const nimble::Error& e) {
    std::fprintf(stderr, "nimble-cache: %s\n", e.what());
    return 1;
  }
  return usage();
}
