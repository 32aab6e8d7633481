// The kernel provider of the compiler library that serves every primitive
// with the ops' reference kernels (lib/ops): the VM's engine until the JIT
// provider takes precedence, and the fallback for what it does not compile.
#pragma once

namespace nimble {

/// Adds the reference provider to KernelCache::global() (priority -100, below
/// any compiling provider). Idempotent.
void register_reference_provider();

}  // namespace nimble
