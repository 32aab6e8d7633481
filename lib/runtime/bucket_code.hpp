// Internal: a dim's bucket as one 64-bit code, computed on every kernel call
// of a tiered kernel (a few instructions) and compared as an integer.
//   exact value v:        v                         (bit 63 clear)
//   otherwise:            bit 63 | log2(multiple) << 8 | (k or 0xff)
// where the value lies in [2^k, 2^(k+1) - 1] (0xff: no range kept).
#pragma once

#include <bit>
#include <cstdint>

#include "nimble/runtime/bucket.hpp"

namespace nimble::bucket {

inline constexpr std::uint64_t kInexact = std::uint64_t{1} << 63;
inline constexpr std::uint64_t kNoRange = 0xff;

[[nodiscard]] inline std::uint64_t code_of(const BucketPolicy& policy, std::int64_t value) noexcept {
  if (value <= policy.exact_up_to || value <= 0) return static_cast<std::uint64_t>(value < 0 ? 0 : value);
  const auto v = static_cast<std::uint64_t>(value);
  const auto cap = static_cast<std::uint64_t>(policy.max_multiple);
  const std::uint64_t multiple = std::min(v & (~v + 1), cap);  // lowest set bit, capped
  const std::uint64_t range =
      policy.power_of_two_ranges ? static_cast<std::uint64_t>(std::bit_width(v) - 1) : kNoRange;
  return kInexact | static_cast<std::uint64_t>(std::countr_zero(multiple)) << 8 | range;
}

/// The facts a code stands for.
[[nodiscard]] DimBucket decode(const BucketPolicy& policy, std::uint64_t code) noexcept;

}  // namespace nimble::bucket
