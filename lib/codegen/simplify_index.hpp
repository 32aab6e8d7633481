// Index arithmetic simplified with what loop bounds say. Reshape unravels a
// flat index with floordiv and floormod by the dims (ops/transform.cpp), so a
// reshape after a transpose, or the heads of BERT's attention, index with
//
//   x[floordiv((i * 12 + h) * 64 + d, 768), floormod((i * 12 + h) * 64 + d, 768)]
//
// which, with h in [0, 12) and d in [0, 64), is x[i, h * 64 + d]: a load that
// is contiguous along d (it vectorizes) and costs no division. The rule, for a
// divisor C > 0 and an index in linear form Σ c·v + c0 (integer coefficients,
// atoms v): each coefficient splits as c = q·C + r with 0 <= r < C, so that
//
//   floordiv(Σ c·v + c0, C) = Σ q·v + q0 + floordiv(R, C),   R = Σ r·v + r0
//   floormod(Σ c·v + c0, C) = floormod(R, C)
//
// exactly, for any integer values; where every atom of R has known bounds and
// R lies in [0, C), floordiv(R, C) is 0 and floormod(R, C) is R.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "ops/compute.hpp"

namespace nimble::codegen {

/// Variables known to lie in [0, bound] (inclusive): loop and reduction axes
/// of constant extent.
using VarBounds = std::unordered_map<const te::VarNode*, std::int64_t>;

/// `index` (an i64 expression) with each floordiv and floormod by a
/// positive constant simplified as above; `index` itself where nothing
/// simplifies (the same node, so that identity tests still hold).
[[nodiscard]] te::Expr simplify_index(const te::Expr& index, const VarBounds& bounds);

/// `e` with the indices of every load simplified: `bounds` are the enclosing
/// loops' axes; a reduction's axes of constant extent are added inside it.
[[nodiscard]] te::Expr simplify_load_indices(const te::Expr& e, const VarBounds& bounds);

}  // namespace nimble::codegen
