// The passes over the IR, in the order the pipeline runs them
// (lib/compiler/pipeline.cpp): each a Module -> Module function, one file
// each; all but infer_types take and return a typed module.
#pragma once

#include "nimble/ir/module.hpp"
#include "nimble/runtime/device.hpp"

namespace nimble::passes {

/// Verifies and types a module that is not typed yet (parsed text); a
/// typed one (Builder::build's) is returned as it is. Throws what
/// ir::verify and ir::infer_types throw.
[[nodiscard]] ir::Module infer_types(const ir::Module& module);

/// Constant folding (through the reference kernels), common-subexpression
/// elimination, exact algebraic identities (x * 1, x - 0, neg(neg(x)), a
/// cast or reshape to x's own type) and dead-code elimination of pure lets
/// (simplify.cpp states the rules).
[[nodiscard]] ir::Module simplify(const ir::Module& module);

/// A dense whose weight is a 2-d f32 constant and whose input has more
/// than one row becomes matmul(x, Wᵀ) + bias, Wᵀ computed here once
/// (pretranspose_weights.cpp says why).
[[nodiscard]] ir::Module pretranspose_weights(const ir::Module& module);

/// Each part read of a split along an axis of static extent becomes a
/// strided_slice of the split's input, which fuses into its readers; the
/// split goes when nothing else reads its tuple (split_to_slices.cpp).
[[nodiscard]] ir::Module split_to_slices(const ir::Module& module);

/// Groups op calls into primitive functions (`primitive fn`), one kernel
/// each: elementwise / broadcast / injective chains, a reduction with its
/// injective producers and consumers, dense / matmul with an injective
/// epilogue; within one straight-line block, never across control flow
/// (fuse_ops.cpp states the rules).
[[nodiscard]] ir::Module fuse_ops(const ir::Module& module);

/// Gives every value a device and inserts a device_copy where a value
/// crosses devices: kernels on `target`, the VM's scalar work, shape reads
/// and data-dependent shapes on the CPU, values that meet without an op
/// (parameters, results, fields) where their type says, an entry's tensors
/// on the host (place_devices.cpp states the rules) — but an entry's results
/// where `results` says: the CPU, or `target` to place them by type as any
/// function's. For the CPU: the module unchanged. Error(not_supported) for
/// an entry whose results would carry tensors back to the host inside an
/// ADT; Error(invalid_argument) for `results` neither the CPU nor `target`.
[[nodiscard]] ir::Module place_devices(const ir::Module& module, Device target, Device results = Device::cpu());

/// A rank-0 integer or bool: a value the VM computes with itself (loop
/// counters, conditions), which lives on the CPU.
[[nodiscard]] bool is_vm_scalar(const ir::Type& t);

/// Where place_devices runs an op call (or a call of a primitive function)
/// for `target`; the bytecode compiler allocates its outputs there.
[[nodiscard]] Device device_of_op_call(const ir::CallNode& call, Device target);

}  // namespace nimble::passes
