// The optimization passes (../shared/DESIGN.md, steps 2-4): each a pure
// Module -> Module function over a typed module, returning a typed module.
#pragma once

#include "nimble/ir/module.hpp"

namespace nimble::passes {

/// Constant folding (through the reference kernels), common-subexpression
/// elimination, exact algebraic identities (x * 1, x - 0, neg(neg(x)), a
/// cast or reshape to x's own type) and dead-code elimination of pure lets
/// (simplify.cpp states the rules).
[[nodiscard]] ir::Module simplify(const ir::Module& module);

/// Groups op calls into primitive functions (`primitive fn`), one kernel
/// each: elementwise / broadcast / injective chains, a reduction with its
/// injective producers and consumers, dense / matmul with an injective
/// epilogue; within one straight-line block, never across control flow
/// (fuse_ops.cpp states the rules).
[[nodiscard]] ir::Module fuse_ops(const ir::Module& module);

}  // namespace nimble::passes
