// Internal: a primitive's kernels per shape bucket, as the KernelCache hands
// them to VMs. It wraps the generic kernel (correct for every shape); each
// call computes the bucket of its dynamic dims (BucketPolicy, a few
// instructions per dim), finds the specialized kernel of that bucket in a
// small table (lock-free: an integer compare per entry) and runs it. A new
// bucket is specialized once — in the background while the generic kernel
// serves, or before the call in synchronous mode — up to the policy's limit
// per function, after which the generic kernel serves and the calls are
// counted (EngineStats::buckets_over_limit).
#pragma once

#include <memory>

#include "nimble/runtime/kernel.hpp"

namespace nimble {

/// The most dynamic dims a kernel is specialized over; a kernel with more
/// is used generic only.
inline constexpr std::size_t kMaxBucketDims = 6;

/// `generic` wrapped so that `provider` specializes it per bucket, or
/// `generic` itself when it has no dynamic dims (or too many), or the
/// policy allows no specialized kernel.
[[nodiscard]] Ref<Kernel> make_tiered_kernel(const PrimitiveInfo& prim, Ref<Kernel> generic,
                                             std::shared_ptr<KernelProvider> provider,
                                             const KernelCacheOptions& options);

}  // namespace nimble
