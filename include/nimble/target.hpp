// What nimble compiles for: the host CPU as LLVM sees it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nimble {

/// The host CPU's target description, as used for JIT code generation and as
/// part of every kernel-cache key (a kernel compiled for one CPU is never run
/// on another). Computed once; thread-safe.
struct HostTarget {
  std::string triple;                 ///< e.g. "x86_64-pc-linux-gnu"
  std::string cpu;                    ///< e.g. "znver4"
  std::vector<std::string> features;  ///< enabled features, sorted: "avx2", "avx512f", ...

  /// True when `feature` (an LLVM feature name such as "avx512f") is enabled.
  [[nodiscard]] bool has(std::string_view feature) const;
};

/// The host target, detected through LLVM on first use.
[[nodiscard]] const HostTarget& host_target();

/// The version of the LLVM nimble was built with, e.g. "19.1.7".
[[nodiscard]] std::string llvm_version();

}  // namespace nimble
