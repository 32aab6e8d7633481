// Checks of an op call's attributes against the op's declaration, for type
// inference (before the type relation) and the verifier. all_ops, find_op and
// attr_or_default are declared with OpDef in ir/op.hpp.
#pragma once

#include "ir/op.hpp"

namespace nimble::ir {

/// Checks every attribute of `attrs` against `op`'s AttrSpecs: each must be
/// declared ("add: unknown attribute 'axis'") and of its kind ("sum: attribute
/// 'axes' must be integers, got 1"), and every required one present ("cast:
/// missing attribute 'dtype'"). Throws Error(type_error); the message starts
/// with the op name.
void check_attrs(const OpDef& op, const Attrs& attrs);

}  // namespace nimble::ir
