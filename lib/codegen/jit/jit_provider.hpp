// The JIT as the process's KernelProvider (jit_provider.cpp): CPU kernels,
// and GPU kernels for primitives placed on a GPU.
#pragma once

#include <memory>

#include "nimble/runtime/kernel.hpp"

namespace nimble::codegen {

/// A JIT provider, named "jit" (tests wrap one).
[[nodiscard]] std::shared_ptr<KernelProvider> make_jit_provider();

/// Adds the JIT ("jit", priority 0: before the reference kernels) to the
/// process's KernelCache; idempotent.
void register_jit_provider();

}  // namespace nimble::codegen
