// Transcendental functions emitted inline as LLVM IR: range reduction plus
// minimax polynomials, shared by the CPU JIT and the NVPTX backend.
//
// Each emitter appends straight-line code (no branches, no new basic blocks)
// at the builder's insertion point and returns the result. The argument is a
// scalar `float`/`double` or a fixed vector `<N x float>`/`<N x double>`; the
// result has the same type. Lanes are independent: every special case is a
// `select`, so the code works unchanged inside a vectorized loop body. A NaN
// argument gives NaN (the unary functions return that NaN itself).
//
// The generated code calls no function: it uses plain arithmetic, bitcasts,
// integer and/or/shifts, and only the intrinsics llvm.fma, fabs, floor, trunc,
// sqrt and copysign, which lower inline on x86-64 with AVX2+FMA (without FMA
// hardware llvm.fma becomes a libm call) and on NVPTX; in a module flagged
// kX86Avx512Flag, 512-bit vectors also use AVX-512's vscalefps/pd.
//
// Assumptions. Fast-math flags set on the builder are ignored (cleared while
// an emitter runs), and the function must not carry unsafe-fp-math or
// no-nans/no-infs attributes: the error-free sums and the add-and-subtract
// rounding trick must not be reassociated, and the special cases are NaN and
// inf tests. FP contraction (fmul+fadd -> fma) is harmless: every product
// that must be exact is already an explicit fma. IEEE denormals and
// round-to-nearest are assumed; under flush-to-zero, denormal inputs read as
// zero and results that should be denormal flush to zero.
//
// Accuracy. Error = |result - exact| in ulps of the exact result (a
// correctly rounded result scores <= 0.5; a denormal result's ulp is the
// denormal spacing). f32 unary: every one of the 2^32 inputs, reference in
// double. f64 unary: 10^8 random plus special inputs, reference in long
// double, so these are observed maxima. pow: 5*10^7 random pairs per type and
// a grid of special values (special results bit-exact against std::pow).
// fmod: 10^8 (f32) / 5*10^7 (f64) random pairs, bit-exact against std::fmod.
//
//   function  f32    f64    denormal results (f32/f64)
//   exp       0.99   0.98   0.75 / 0.76
//   log       0.75   0.86   -
//   tanh      2.42   2.57   0 / 0 (tanh(x) = x for denormal x)
//   sigmoid   2.40   2.40   0.75 / 0.76
//   erf       1.10   1.20   0.62 / 0.55
//   rsqrt     1.49   1.50   -
//   pow       0.50   1.55   0.50 / 0.82  (f32: correctly rounded except within
//                                        ~2^-20 ulp of a tie)
//   fmod      0      0      exact for every input
//   log1p     ≤ 1 ulp from the reference rounded to the type, over the jit
//             test's sample (2^22 f32 bit patterns spread over all 2^32;
//             2^20 random f64 patterns and a grid over [-40, 40]): a
//             sample, not the exhaustive f32 measurement of the rows above
//
// Thread safety: the emitters only touch the builder they are given.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace nimble::codegen {

/// A module flag (any value) saying the module is for x86 with AVX-512: the
/// emitters may then use its instructions on 512-bit vectors (the CPU
/// emitter sets it with CpuEmitOptions::x86_avx512).
inline constexpr const char* kX86Avx512Flag = "nimble.x86-avx512";

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

/// The floating-point unary primitives that are one LLVM instruction or
/// intrinsic: -x, |x|, the rounded sqrt, floor and ceil (every unary
/// primitive X of ops/unary_ops.def has its emit_X, which the emitter's
/// dispatch calls).
llvm::Value* emit_neg(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_abs(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_sqrt(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_floor(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_ceil(llvm::IRBuilderBase& b, llvm::Value* x);

/// log(1 + x), accurate for tiny x (where 1 + x rounds to 1): log of the
/// rounded u = 1 + x plus the rounding's error over u. log1p(-1) = -inf,
/// log1p(x < -1) = NaN, log1p(+inf) = +inf, log1p(±0) = ±0, and denormal x
/// give x.
llvm::Value* emit_log1p(llvm::IRBuilderBase& b, llvm::Value* x);

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
