// The operator descriptor the IR refers to. The op library (lib/ops) defines
// one OpDef per op, once, with static storage; core code names ops through
// their accessors (ops::add()), never by string. Only the parser looks ops
// up by name.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "nimble/ir/expr.hpp"
#include "nimble/runtime/value.hpp"

// Compute rules are written in lib/ops/compute.hpp's tensor expressions;
// the IR only names the handle type (ops may include ir, never the reverse).
namespace nimble::te {
class Tensor;
}  // namespace nimble::te

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

/// How an op combines with its neighbours when ops are fused into one
/// kernel (as TVM's OpPatternKind); ordered from the most to the least fusable.
enum class OpPattern : std::uint8_t {
  /// out[i] = f(in0[i], in1[i], ...) over one shape: inlined into any consumer,
  /// and any elementwise/broadcast chain becomes one loop.
  elementwise,
  /// elementwise after numpy broadcasting (an input index drops or zeroes
  /// the dims it broadcasts): fuses as elementwise does.
  broadcast,
  /// each output element reads input elements at indices computed from its
  /// own index (and from scalar data: slice bounds, gathered indices): may be
  /// inlined into consumers; an injective chain becomes one loop nest.
  injective,
  /// output elements fold sets of input elements (sum, max, argmax, and the
  /// multi-stage normalizations): injective producers inline into the
  /// reduction's source, elementwise consumers fuse into its epilogue.
  reduction,
  /// dense and (batch) matmul: a register-blocked micro-kernel with its own
  /// schedule; elementwise consumers (bias, activation, residual) fuse into
  /// its epilogue, producers are not inlined (inputs are packed).
  out_elemwise_fusable,
  /// no compute rule: never fused; runs its own kernel or the VM does it.
  opaque,
};

/// The op's computation as tensor expressions (lib/ops/compute.hpp), for the
/// code generators: given te placeholders (or fused producer stages) for its
/// tensor arguments, one per tensor in arg_names order with a tuple argument
/// contributing one per field, it returns one te::Tensor per output tensor
/// (a tuple result gives one per field), following the semantics of the
/// op's reference kernel. Assumes the call type-checked; run-time conditions
/// the types leave open become te Checks. Attribute errors throw type_error.
using ComputeRule = std::vector<te::Tensor> (*)(std::span<const te::Tensor> inputs,
                                                const Attrs& attrs);

/// The inputs an element-wise op over floating point is tested on: tests and
/// random programs draw x from [lo, hi] for every op that sets
/// OpDef::float_inputs, so that a new op of that kind is covered without a
/// list to extend.
struct InputRange {
  double lo = -3;
  double hi = 3;
};

/// A typical call, for docs/ops.md: a function's parameters and the call,
/// in IR text. tools/nimble-ops-doc prints it with the type it infers, and
/// fails (so does the ops_doc test) if it does not type-check.
struct OpExample {
  std::string_view params;
  std::string_view call;
};

struct OpDef {
  std::string_view name;
  /// Names of the arguments, in order; the op takes exactly this many.
  std::span<const std::string_view> arg_names;
  std::span<const AttrSpec> attrs;
  TypeRelation type_relation;
  /// How the op fuses; opaque exactly when it has no compute rule.
  OpPattern pattern = OpPattern::opaque;
  /// The compute rule; nullptr only for opaque ops (each says why).
  ComputeRule compute = nullptr;
  /// The reference implementation; nullptr where the op has none yet.
  ReferenceKernel reference = nullptr;
  /// Set for the element-wise ops of one floating-point operand (exp, tanh,
  /// …): where tests draw it from.
  std::optional<InputRange> float_inputs;
  /// What the op computes, in one sentence (docs/ops.md).
  std::string_view summary;
  OpExample example;
};

/// Installs the op table that all_ops and find_op read; called once, by the
/// op library as it loads (lib/ops/registry.cpp: the IR does not know the
/// ops). `ops` must outlive every use; names must be unique.
void install_ops(std::span<const OpDef* const> ops);
/// Every registered op.
[[nodiscard]] std::span<const OpDef* const> all_ops() noexcept;
/// The op called `name`, or nullptr. For the parser; core code uses accessors.
[[nodiscard]] const OpDef* find_op(std::string_view name) noexcept;

/// The value of attribute `name` of `call_attrs`, or the op's default; throws
/// Error(type_error) if it is missing or of the wrong kind.
[[nodiscard]] const AttrValue& attr_or_default(const OpDef& op, const Attrs& call_attrs,
                                               std::string_view name);

/// Checks every attribute of `attrs` against `op`'s AttrSpecs: each must be
/// declared ("add: unknown attribute 'axis'") and of its kind ("sum: attribute
/// 'axes' must be integers, got 1"), and every required one present ("cast:
/// missing attribute 'dtype'"). Throws Error(type_error); the message starts
/// with the op name. For type inference (before the type relation) and the
/// verifier.
void check_attrs(const OpDef& op, const Attrs& attrs);

}  // namespace nimble::ir
