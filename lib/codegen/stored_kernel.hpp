// What the CPU's and the GPU's kernels share of the disk cache
// (kernel_store.hpp): a stored kernel's identity, and its loading from the
// store, counted in the engine stats.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "nimble/runtime/kernel.hpp"

namespace nimble::codegen {

class KernelStore;

/// What a stored kernel of `prim` specialized for `bucket` (text; empty:
/// generic) is made from: this build of nimble (its code that lowers, emits
/// and calls kernels), its LLVM, `code` (the code generator and its target),
/// the primitive and the bucket. The disk cache's identity (kernel_store.hpp).
[[nodiscard]] std::string kernel_identity(std::string_view code, const PrimitiveInfo& prim, std::string_view bucket);

/// The kernel `load` makes of the payload `store` (null: none) holds under
/// `key` and `identity`, counted as a disk hit loaded since `start`; null
/// when there is none, or when `load` returns null or throws (an entry that
/// cannot be used: counted as rejected, for the caller to replace).
[[nodiscard]] Ref<Kernel> load_stored_kernel(const KernelStore* store, std::uint64_t key, std::string_view identity,
                                             std::chrono::steady_clock::time_point start,
                                             const std::function<Ref<Kernel>(std::string_view payload)>& load);

}  // namespace nimble::codegen
