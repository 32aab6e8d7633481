// Recognizes a stage that is a batch of dot products along contiguous rows —
// dense's `x · wᵀ`, batch_matmul's `a · bᵀ` — so that a code generator can
// emit it as a register-blocked tile instead of one reduction per element:
//
//   for <outer loops> :             (any; the outermost, or with none the columns,
//                                    may be split across threads)
//     for i in [0, M) :             `rows`: the loop a's row depends on (may be absent)
//       for <unit loops> :          loops of constant extent 1 (their vars are 0)
//         for j in [0, N) :         `cols`: the innermost loop
//           out[f(..., i, j)] = e(init + sum(a[..., i, k] * b[..., j, k] for k < K))
//
// (e: an epilogue of the sum, element-wise in i and j — dense's bias and
// what fusion joined — or none)
// where a's and b's last index is exactly k (contiguous in k), a does not
// depend on j and b not on i, no index but the last depends on k, neither
// load is checked, everything is f32, and the outermost loop is not a unit
// loop (unless it is the only one). A tile of rows × cols then keeps
// its sums in vector registers across k, reading each row of a once per
// tile column block and each row of b once per tile row block.
#pragma once

#include <optional>
#include <vector>

#include "codegen/kernel_ir.hpp"

namespace nimble::codegen {

struct DotProductStage {
  std::vector<const Stmt*> outer;  ///< loops outside `rows`, outermost first
  const Stmt* rows = nullptr;      ///< null: a single row (every a index fixed by outer loops)
  std::vector<const Stmt*> unit;   ///< extent-1 loops between rows and cols
  const Stmt* cols = nullptr;
  const Stmt* store = nullptr;     ///< its value is `sum`, or an epilogue of it
  const te::ReduceNode* sum = nullptr;
  const te::LoadNode* a = nullptr;  ///< the row operand (independent of cols)
  const te::LoadNode* b = nullptr;  ///< the column operand (independent of rows)
  /// The store's index is contiguous in cols and its value computes lane by
  /// lane along them (lane_wise_along): a tile's row of sums can go through
  /// the epilogue and to memory as one vector.
  bool row_vectors = false;
};

/// Whether `e` depends on `var`.
[[nodiscard]] bool depends_on(const te::Expr& e, const te::VarNode* var);

/// Whether `b` computes lane by lane with x86 vector instructions: it is
/// not checked (a checked op can fail), nor an integer division, remainder
/// or power (which x86 has no vector instructions for).
[[nodiscard]] bool has_vector_instructions(const te::BinaryNode& b);

/// Whether `index` is lowering's row-major index with `j` last: `... * N +
/// j`, or j (consecutive j, consecutive elements).
[[nodiscard]] bool contiguous_index(const te::Expr& index, const te::VarNode* j);

/// Whether `e` computes lane by lane for consecutive values of `j` with
/// vector instructions: every load either reads along j contiguously (its
/// last index j, no other depending on it) or not at all, j appears nowhere
/// else, nothing can fail (no checked load) or needs a loop (the only
/// reduction is `sum`, whose value is given), and every binary op
/// has_vector_instructions.
[[nodiscard]] bool lane_wise_along(const te::Expr& e, const te::VarNode* j, const te::ReduceNode* sum);

/// The dot-product form of `stage` of `kernel`, or nullopt if it is not one.
[[nodiscard]] std::optional<DotProductStage> match_dot_product(const KernelIR& kernel, const Stage& stage);

// The other form of a product: matmul's `a · b` with b not transposed, which
// lowering sums with k outside the columns (lower_reduction_outside), after
// a stage that stores init:
//
//   for <outer loops> :             (any; the outermost may be split across threads)
//     for i in [0, M) :             `rows` (may be absent)
//       for <unit loops> :
//         for k in [0, K) :
//           for j in [0, N) :       `cols`
//             out[f(..., i, j)] = out[f(..., i, j)] + a[..., i, k] * b[..., k, j]
//
// where b's last index is exactly j and no other depends on it, a does not
// depend on j nor b on i, neither load is checked, everything is f32, and f
// is lowering's row-major index (`... * N + j`). A tile of rows × vectors of
// columns then keeps its sums in registers across k: each k broadcasts one
// element of a per row and loads one vector of b per column vector (outer
// products, no horizontal sums).
struct OuterProductStage {
  std::vector<const Stmt*> outer;  ///< loops outside `rows`, outermost first
  const Stmt* rows = nullptr;      ///< null: a single row
  std::vector<const Stmt*> unit;   ///< extent-1 loops between rows and k
  const Stmt* k = nullptr;
  const Stmt* cols = nullptr;
  const Stmt* store = nullptr;
  const te::LoadNode* a = nullptr;  ///< the row operand (independent of cols)
  const te::LoadNode* b = nullptr;  ///< the column operand, contiguous in cols
};

/// The outer-product form of `stage` of `kernel`, or nullopt if it is not one.
[[nodiscard]] std::optional<OuterProductStage> match_outer_product(const KernelIR& kernel, const Stage& stage);

/// Either form as a product of a's rows [..., i, k] with b's columns j over
/// k, for a GPU's tiles (codegen/cuda/gpu_schedule.hpp): the loops, k, the
/// operands, and what an element stores.
struct TiledProduct {
  std::vector<const Stmt*> outer;
  const Stmt* rows = nullptr;  ///< null: a single row
  std::vector<const Stmt*> unit;
  const Stmt* cols = nullptr;
  const te::VarNode* k_var = nullptr;
  const te::Expr* k_extent = nullptr;
  const te::LoadNode* a = nullptr;
  const te::LoadNode* b = nullptr;
  bool b_along_cols = false;  ///< b's consecutive elements are consecutive columns (an outer product's)
  const Stmt* store = nullptr;
  /// A dot product's sum (the store's value is it or an epilogue of it);
  /// null: an outer product, whose element adds the sum to what it holds.
  const te::ReduceNode* sum = nullptr;
};

/// `stage` of `kernel` as a TiledProduct: its dot-product form, or else its
/// outer-product form; nullopt if it has neither.
[[nodiscard]] std::optional<TiledProduct> match_tiled_product(const KernelIR& kernel, const Stage& stage);

}  // namespace nimble::codegen
