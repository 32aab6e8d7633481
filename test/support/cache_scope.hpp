// Test helpers for the kernel caches: the process's KernelCache options set
// for one test, and a directory of its own for a disk cache.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "nimble/runtime/kernel.hpp"
#include "nimble/runtime/stats.hpp"

namespace nimble::testing {

// Sets the process's KernelCache options for one test and restores them.
class ScopedCacheOptions {
 public:
  explicit ScopedCacheOptions(KernelCacheOptions options) : saved_(KernelCache::global().options()) {
    KernelCache::global().configure(std::move(options));
    reset_engine_stats();
  }
  ~ScopedCacheOptions() { KernelCache::global().configure(saved_); }
  ScopedCacheOptions(const ScopedCacheOptions&) = delete;
  ScopedCacheOptions& operator=(const ScopedCacheOptions&) = delete;

 private:
  KernelCacheOptions saved_;
};

// A fresh directory under the system's temporary one, removed at the end.
class TempDir {
 public:
  TempDir()
      : path_(std::filesystem::temp_directory_path() /
              fmt::format("nimble_cache_test_{}_{}", ::getpid(), counter_++)) {
    std::filesystem::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string str() const { return path_.string(); }
  /// Every file but the cache's secret: entries, and any temporary file left.
  [[nodiscard]] std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> all;
    if (std::filesystem::exists(path_))
      for (const auto& e : std::filesystem::directory_iterator(path_))
        if (e.path().filename() != "secret") all.push_back(e.path());
    std::sort(all.begin(), all.end());
    return all;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace nimble::testing
