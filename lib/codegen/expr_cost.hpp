// What an expression's ops cost once emitted, about, in instructions: the one
// table of the expanded ops — the unary primitives' costs as
// ops/unary_ops.def states them (math.hpp's transcendentals, a few dozen
// instructions each), a floating pow or fmod here — so that a new one is
// costed once for every caller — the emitter sizing a vector loop's body and the
// lowering weighing an epilogue it folds into a product's tile.
#pragma once

#include "ops/compute.hpp"

namespace nimble::codegen {

/// Whose count: the two callers count some ops differently, each as its
/// thresholds were tuned with.
enum class OpCostOf {
  /// What the emitter emits (llvm/emit_loops.cpp's emitted_size, against
  /// CpuEmitOptions::vector_loop_min_size): a floating pow or fmod
  /// expanded (60), an integer one a single op.
  emitted,
  /// How heavy an epilogue folded into a product's tile is (lower_compute's
  /// kMaxFoldedEpilogue): fmod one op, pow 60 of any dtype.
  epilogue,
};

/// About how many instructions the op at the root of `e` is by itself (its
/// operands not counted): a unary primitive its cost_of (an expanded
/// transcendental 30), an expanded pow or fmod 60, anything else 1.
[[nodiscard]] int op_cost(const te::Expr& e, OpCostOf of);

}  // namespace nimble::codegen
