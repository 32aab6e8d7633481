// The operator library: one accessor per op, each returning the op's one
// OpDef (static storage). Core code and the builder refer to ops only
// through these accessors. Families live one per file (elementwise.cpp,
// binary.cpp, reduce.cpp, linalg.cpp, transform.cpp, creation.cpp, list.cpp),
// each op with its type relation, fusion pattern, compute rule (compute.hpp)
// and reference kernel; ops.def lists them all, once (their arguments and
// attributes are documented there), for these declarations and the op table.
#pragma once

#include "ir/op.hpp"

namespace nimble::ops {

using ir::OpDef;

#define NIMBLE_OP(name) const OpDef& name();
#include "ops/ops.def"
#undef NIMBLE_OP

}  // namespace nimble::ops
