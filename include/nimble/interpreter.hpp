// The reference interpreter: runs any well-typed module directly, op by op,
// with each op's reference kernel. Deliberately simple and obviously right:
// it is the oracle every faster engine is checked against.
#pragma once

#include <string_view>
#include <vector>

#include "nimble/ir/module.hpp"
#include "nimble/runtime/value.hpp"

namespace nimble {

/// Evaluates entry point `entry` of `module` on `args` and returns its result.
///
/// `module` must be type-checked (Builder::build, or ir::verify and
/// ir::infer_types). Every argument is checked against its declared type
/// first: the dtype, the rank and every fixed dim must match; `Any` accepts
/// any extent; a symbol binds to its first extent in the call and must agree
/// everywhere else, and within its upper bound. A mismatch raises
/// Error(type_error) naming the function, the argument, and the expected and
/// actual types. Run-time errors of the kernels (an index out of range, a
/// shape that does not broadcast) are Errors too. The arguments are never
/// modified.
///
/// Tail calls (loops) run in constant stack; other recursion (a tree) runs on
/// a dedicated thread with a 1 GiB stack, which holds ~100,000s of nested calls.
/// Thread-safe: evaluations share nothing but the (immutable) module.
[[nodiscard]] Value evaluate(const ir::Module& module, std::string_view entry,
                             std::vector<Value> args);

}  // namespace nimble
