#include "nimble/runtime/bucket.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/bucket_code.hpp"
#include "support/check.hpp"

namespace nimble {

bool DimBucket::contains(std::int64_t value) const noexcept {
  if (exact >= 0) return value == exact;
  return value >= min && value <= max && value % multiple == 0;
}

std::string Bucket::to_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const DimBucket& d = dims[i];
    if (i > 0) s += ", ";
    if (d.exact >= 0) {
      s += fmt::format("={}", d.exact);
      continue;
    }
    std::string facts;
    if (d.multiple > 1) facts += fmt::format("%{}", d.multiple);
    if (!facts.empty()) facts += ' ';
    facts += d.max == std::numeric_limits<std::int64_t>::max() ? fmt::format("{}..", d.min)
                                                                 : fmt::format("{}..{}", d.min, d.max);
    s += facts;
  }
  s += "]";
  return s;
}

DimBucket bucket::decode(const BucketPolicy& policy, std::uint64_t code) noexcept {
  DimBucket d;
  if ((code & kInexact) == 0) {
    d.exact = static_cast<std::int64_t>(code);
    d.min = d.max = d.exact;
    return d;
  }
  d.multiple = std::int64_t{1} << ((code >> 8) & 0x3f);
  const std::uint64_t range = code & 0xff;
  d.min = std::max<std::int64_t>(policy.exact_up_to + 1, 1);
  if (range != kNoRange) {
    d.min = std::max(d.min, std::int64_t{1} << range);
    d.max = range >= 62 ? std::numeric_limits<std::int64_t>::max()
                        : (std::int64_t{1} << (range + 1)) - 1;
  }
  return d;
}

DimBucket BucketPolicy::bucket_of(std::int64_t value) const noexcept {
  return bucket::decode(*this, bucket::code_of(*this, value));
}

Bucket BucketPolicy::bucket_of(std::span<const std::int64_t> values) const {
  Bucket b;
  for (std::int64_t v : values) b.dims.push_back(bucket_of(v));
  return b;
}

void BucketPolicy::validate() const {
  if (exact_up_to < -1)
    throw_error(ErrorKind::invalid_argument, "BucketPolicy: exact_up_to must be >= -1, got {}", exact_up_to);
  if (max_multiple < 1 || (max_multiple & (max_multiple - 1)) != 0)
    throw_error(ErrorKind::invalid_argument, "BucketPolicy: max_multiple must be a power of two, got {}",
                max_multiple);
  if (max_specialized_per_function > 64)
    throw_error(ErrorKind::invalid_argument,
                "BucketPolicy: max_specialized_per_function must be at most 64, got {}",
                max_specialized_per_function);
}

}  // namespace nimble
