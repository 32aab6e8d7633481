// The operator library: one accessor per op, each returning the op's one
// OpDef (static storage). Core code and the builder refer to ops only
// through these accessors. Families live one per file (elementwise.cpp,
// binary.cpp, reduce.cpp, linalg.cpp, transform.cpp, creation.cpp, list.cpp),
// each op with its type relation, fusion pattern, compute rule (compute.hpp)
// and reference kernel; registry.cpp lists them all for the parser.
//
// Arguments and attributes, per op (types: T = any tensor type; broadcasting
// follows numpy/PyTorch, with `Any` and symbolic dims: see broadcast.hpp):
#pragma once

#include "ir/op.hpp"

namespace nimble::ops {

using ir::OpDef;

// --- elementwise unary (x) -> same type; float dtypes only except neg/abs ---------
const OpDef& neg();
const OpDef& abs();
const OpDef& exp();
const OpDef& log();
const OpDef& sqrt();
const OpDef& rsqrt();
const OpDef& tanh();
const OpDef& sigmoid();
const OpDef& relu();
const OpDef& gelu();  ///< erf form
const OpDef& erf();
const OpDef& cast();         ///< attrs: dtype (dtype) -> x's shape with that dtype
const OpDef& logical_not();  ///< bool -> bool

// --- binary with broadcasting (a, b): same dtype required --------------------------
const OpDef& add();
const OpDef& sub();
const OpDef& mul();
const OpDef& div();
const OpDef& maximum();
const OpDef& minimum();
const OpDef& power();
const OpDef& equal();          ///< -> bool
const OpDef& not_equal();      ///< -> bool
const OpDef& less();           ///< -> bool
const OpDef& less_equal();     ///< -> bool
const OpDef& greater();        ///< -> bool
const OpDef& greater_equal();  ///< -> bool
const OpDef& logical_and();    ///< bool, bool -> bool
const OpDef& logical_or();     ///< bool, bool -> bool
const OpDef& where();          ///< (cond: bool, x, y) -> broadcast of all three

// --- reductions (x) ------------------------------------------------------------------
// sum/mean/max/min: attrs axes (integers; [] = all axes), keepdims (bool, false).
const OpDef& sum();
const OpDef& mean();
const OpDef& max();
const OpDef& min();
const OpDef& argmax();       ///< attrs: axis (integer), keepdims (bool, false) -> i64
const OpDef& softmax();      ///< attrs: axis (integer, -1) -> same type
const OpDef& log_softmax();  ///< attrs: axis (integer, -1) -> same type
/// (x, gamma, beta): attrs axis (integer, -1), epsilon (real, 1e-5); gamma and
/// beta have the shape of x's normalized (last) axis -> x's type.
const OpDef& layer_norm();

// --- linear algebra --------------------------------------------------------------------
/// (x [..., k], weight [n, k], bias [n]) -> [..., n]: x·Wᵀ + b.
const OpDef& dense();
/// (a [m, k], b [k, n]) -> [m, n]; attrs transpose_a, transpose_b (bool, false).
const OpDef& matmul();
/// (a [B, m, k], b [B, k, n]) -> [B, m, n]; attrs transpose_a, transpose_b; B broadcasts.
const OpDef& batch_matmul();

// --- shape and data movement -------------------------------------------------------------
/// attrs newshape (integers): -1 infers one dim, 0 copies the input dim unless
/// allow_zero (bool, false).
const OpDef& reshape();
const OpDef& transpose();    ///< attrs axes (integers; [] = reverse)
const OpDef& expand_dims();  ///< attrs axis (integer)
const OpDef& squeeze();      ///< attrs axes (integers; [] = every static 1)
/// (fields: a tuple of tensors) attrs axis (integer) -> concatenation.
const OpDef& concatenate();
/// attrs sections (integer, 0) or indices (integers), axis (integer) -> a tuple.
const OpDef& split();
/// attrs begin, end, strides (integers; strides default all 1), axes (integers,
/// default the leading axes) with static bounds.
const OpDef& strided_slice();
/// (x, begin: i64[k], end: i64[k]) with run-time bounds: sliced dims are Any.
const OpDef& dynamic_strided_slice();
/// (data, indices: i32/i64) attrs axis (integer, 0) ->
/// data.shape[:axis] + indices.shape + data.shape[axis+1:].
const OpDef& take();
/// (table [V, D], ids: i32/i64 [...]) -> [..., D].
const OpDef& embedding();

// --- creation and data-dependent shapes --------------------------------------------------
/// (shape: i64[k]) attrs dtype -> a rank-k tensor whose dims are Any (run-time shape).
const OpDef& zeros();
const OpDef& ones();
/// (shape: i64[k], value: scalar) attrs dtype.
const OpDef& full();
/// (start, stop, step: scalars of one dtype) -> [?] of that dtype.
const OpDef& arange();
/// (x) -> i64[?, rank]: indices of the non-zero elements.
const OpDef& nonzero();
/// (x) -> i64[rank].
const OpDef& shape_of();

// --- devices ---------------------------------------------------------------------------
/// (x) attrs src, dst (strings: "cpu", "cuda:N") -> x's type, on device dst.
const OpDef& device_copy();

// --- collecting loop results --------------------------------------------------------------
/// (list: List<T[...]>) attrs axis (integer, 0) -> the elements stacked along a
/// new axis of extent Any.
const OpDef& stack();
/// (dest, update, offset: i64[]) -> dest's type: dest with `update` written at
/// `offset` along axis 0.
const OpDef& dynamic_update_slice();

}  // namespace nimble::ops
