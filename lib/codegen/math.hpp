// Transcendental functions emitted inline as LLVM IR: range reduction plus
// minimax polynomials, shared by the CPU JIT and the NVPTX backend.
//
// Each emitter appends straight-line code (no branches, no new basic blocks)
// at the builder's insertion point and returns the result. The argument is a
// scalar `float`/`double` or a fixed vector `<N x float>`/`<N x double>`; the
// result has the same type. Lanes are independent: every special case is a
// `select`, so the code works unchanged inside a vectorized loop body.
//
// The generated code calls no function: it uses plain arithmetic, bitcasts,
// integer and/or/shifts, and only the intrinsics llvm.fma, fabs, floor, trunc,
// sqrt, minnum, maxnum and copysign, all of which lower inline on x86-64 with
// AVX2+FMA and on NVPTX. Fast-math flags set on the builder are ignored (the
// emitters clear them while they run): the error-compensated sequences below
// must not be reassociated. They assume IEEE denormals (no flush-to-zero)
// and round-to-nearest; under FTZ, results that should be denormal flush to
// zero and denormal inputs read as zero.
//
// Accuracy: max error in ulps of the result type against the correctly
// rounded result, measured over every f32 input (all 2^32 bit patterns) and
// over 10^8 random plus special f64 inputs (harness outside the tree, see the
// change description). "ulp" of a denormal result is the denormal spacing.
//
//   function  f32    f64    notes
//   exp       TBD    TBD
//   log       TBD    TBD
//   tanh      TBD    TBD
//   sigmoid   TBD    TBD
//   erf       TBD    TBD
//   rsqrt     TBD    TBD
//   pow       TBD    TBD
//   fmod      0      0      exact for every input
//
// Thread safety: the emitters only touch the builder they are given.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace nimble::codegen {

/// e^x. exp(-inf) = +0, exp(+inf) = +inf, overflow gives +inf, results below
/// the normal range are denormal (one rounding) or +0.
llvm::Value* emit_exp(llvm::IRBuilderBase& b, llvm::Value* x);

/// Natural logarithm. log(±0) = -inf, log(x < 0) = NaN, log(+inf) = +inf;
/// denormal inputs are exact-scaled first, so they are as accurate as normals.
llvm::Value* emit_log(llvm::IRBuilderBase& b, llvm::Value* x);

/// tanh(x) = expm1(2x) / (expm1(2x) + 2), odd: tanh(-0) = -0, tanh(±inf) = ±1.
/// Relative accuracy holds down to denormal x (tanh(x) ≈ x).
llvm::Value* emit_tanh(llvm::IRBuilderBase& b, llvm::Value* x);

/// 1 / (1 + e^-x), evaluated as e^x / (1 + e^x) for x < 0 so that nothing
/// overflows: sigmoid(-inf) = +0, sigmoid(+inf) = 1, and deep negative x gives
/// the (possibly denormal) e^x rather than 0.
llvm::Value* emit_sigmoid(llvm::IRBuilderBase& b, llvm::Value* x);

/// Error function, odd: erf(-0) = -0, erf(±inf) = ±1; erf(x) ≈ 2x/√π with
/// relative accuracy for tiny x.
llvm::Value* emit_erf(llvm::IRBuilderBase& b, llvm::Value* x);

/// 1 / sqrt(x), i.e. the rounded sqrt then a rounded division: rsqrt(+0) =
/// +inf, rsqrt(-0) = -inf (as 1/sqrt(-0)), rsqrt(x < 0) = NaN, rsqrt(inf) = 0.
llvm::Value* emit_rsqrt(llvm::IRBuilderBase& b, llvm::Value* x);

/// x^y with the C99/std::pow special cases: pow(x, ±0) = 1 and pow(1, y) = 1
/// even for NaN; pow(-1, ±inf) = 1; a negative finite base with an integer
/// exponent gives the signed result, with a non-integer finite exponent NaN;
/// the ±0 and ±inf bases and exponents as in Annex F. f32 is computed in
/// double internally (then rounded once), f64 with a double-double log.
/// `x` and `y` must have the same type.
llvm::Value* emit_pow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);

/// std::fmod, exact for every input: x - n*y with n = trunc(x/y), sign of x
/// (zero results keep x's sign); fmod(x, ±0) = NaN, fmod(±inf, y) = NaN,
/// fmod(x, ±inf) = x for finite x, NaN in gives NaN. Costs a fixed chain of
/// reduction steps (6 for f32, computed in double; 41 for f64), each one
/// division, so it is much slower than the other emitters. `x` and `y` must
/// have the same type.
llvm::Value* emit_fmod(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);

}  // namespace nimble::codegen
