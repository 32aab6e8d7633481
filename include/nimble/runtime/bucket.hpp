// Shape buckets: what a specialized kernel may assume about its dynamic dims.
//
// A primitive function is compiled once as a *generic* kernel, correct for
// every shape (each dynamic dim is an argument). When it is called with a
// new combination of dynamic dims, the BucketPolicy maps each dim to a few
// facts — its exact value when small, the power of two it is a multiple of
// (up to the vector width), the power-of-two range it lies in — and a kernel
// is specialized for those facts: it is correct for every shape of the
// bucket (the dims still arrive as arguments) and lets the code generator
// unroll small loops and drop vector tails. Shapes with the same facts share
// one specialized kernel.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace nimble {

/// The facts kept about one dynamic dim.
struct DimBucket {
  /// The dim's value when the policy keeps it exactly, else -1.
  std::int64_t exact = -1;
  /// A power of two the value is a multiple of (1: nothing known).
  std::int64_t multiple = 1;
  /// The value lies in [min, max].
  std::int64_t min = 0;
  std::int64_t max = std::numeric_limits<std::int64_t>::max();

  /// Whether `value` has these facts.
  [[nodiscard]] bool contains(std::int64_t value) const noexcept;
  friend bool operator==(const DimBucket&, const DimBucket&) = default;
};

/// The facts kept about each dynamic dim of a call, in the kernel's order of
/// dynamic dims. Empty: no dynamic dims (the generic kernel is the only one).
struct Bucket {
  std::vector<DimBucket> dims;

  /// E.g. "[=16]" or "[%16, 128..255]" (one entry per dynamic dim).
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Bucket&, const Bucket&) = default;
};

/// How dims are bucketed (the defaults suit AVX-512 / AVX2 CPU kernels).
/// Set process-wide through KernelCache::configure.
struct BucketPolicy {
  /// Dims up to this value are kept exactly (their loops can be unrolled);
  /// -1 keeps none. Zero is always kept exactly.
  std::int64_t exact_up_to = 16;
  /// The largest power of two a dim's divisibility is recorded for (the
  /// vector width of f32 on AVX-512 is 16); 1 records none.
  std::int64_t max_multiple = 16;
  /// Whether larger dims record the power-of-two range [2^k, 2^(k+1) - 1]
  /// they lie in (else only [exact_up_to + 1, max]).
  bool power_of_two_ranges = true;
  /// Specialized kernels per primitive function; calls in further buckets
  /// run the generic kernel (counted in EngineStats::buckets_over_limit).
  std::uint32_t max_specialized_per_function = 8;

  /// The facts this policy keeps about `value` (>= 0).
  [[nodiscard]] DimBucket bucket_of(std::int64_t value) const noexcept;
  /// The bucket of a call whose dynamic dims are `values`.
  [[nodiscard]] Bucket bucket_of(std::span<const std::int64_t> values) const;
  /// Throws Error(invalid_argument) for a policy that cannot be applied
  /// (max_multiple not a power of two, exact_up_to < -1, a zero limit is fine).
  void validate() const;
};

}  // namespace nimble
