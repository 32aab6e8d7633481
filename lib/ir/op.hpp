// The operator descriptor the IR refers to. The op library (lib/ops) defines
// one OpDef per op, once, with static storage; core code names ops through
// their accessors (ops::add()), never by string. Only the parser looks ops
// up by name.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "nimble/ir/expr.hpp"
#include "nimble/runtime/value.hpp"

namespace nimble::ir {

enum class AttrKind : std::uint8_t { boolean, integer, real, string, integers, dtype };

/// An attribute an op accepts; without a default it is required.
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  std::optional<AttrValue> default_value;
};

/// Computes the result type of an op call from its argument types and
/// attributes. Argument types are tensor types (or a tuple type where the op
/// takes one, e.g. concatenate). On a mismatch it throws Error(type_error)
/// whose message names the arguments ("x has 300 columns but W expects 512");
/// inference adds the op name and where the call was built.
using TypeRelation = Type (*)(std::span<const Type> args, const Attrs& attrs);

/// Computes an op call on run-time values: the oracle that every compiled
/// kernel is checked against (lib/ops/*.cpp state the semantics per family).
///
/// `args` are the op's arguments in arg_names order, already checked against
/// the type relation at compile time, but with run-time shapes: what the types
/// left open (Any and symbolic dims: broadcasting, matching reduction dims,
/// divisibility, index ranges, element counts) is checked here. The result is
/// always fresh: it never aliases an argument, and no argument is modified.
///
/// Fails with nimble::Error: invalid_argument for shapes that do not fit
/// together, runtime_error for bad data (an index out of range, an integer
/// division by zero). Like type relations, messages name the arguments as
/// arg_names do but not the op; the caller adds the op name and the call site.
/// Thread-safe: kernels keep no state.
using ReferenceKernel = Value (*)(std::span<const Value> args, const Attrs& attrs);

struct OpDef {
  std::string_view name;
  /// Names of the arguments, in order; the op takes exactly this many.
  std::span<const std::string_view> arg_names;
  std::span<const AttrSpec> attrs;
  TypeRelation type_relation;
  // The op library issue adds: shape function and compute rule.
  /// The reference implementation; nullptr where the op has none yet.
  ReferenceKernel reference = nullptr;
};

/// Every registered op (lib/ops/registry.cpp).
[[nodiscard]] std::span<const OpDef* const> all_ops() noexcept;
/// The op called `name`, or nullptr. For the parser; core code uses accessors.
[[nodiscard]] const OpDef* find_op(std::string_view name) noexcept;

/// The value of attribute `name` of `call_attrs`, or the op's default; throws
/// Error(type_error) if it is missing or of the wrong kind.
[[nodiscard]] const AttrValue& attr_or_default(const OpDef& op, const Attrs& call_attrs,
                                               std::string_view name);

}  // namespace nimble::ir
