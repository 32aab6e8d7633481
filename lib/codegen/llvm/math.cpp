#include "codegen/llvm/math.hpp"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <cassert>
#include <cstdint>
#include <span>

namespace nimble::codegen {

namespace {

using llvm::Value;

// Polynomial coefficients, lowest degree first. All are minimax fits (Remez
// exchange in 50-digit arithmetic) rounded to the working precision; the
// comment on each gives the function fitted and the fit's max error.

// e^r = 1 + r + r^2 P(r) on |r| <= ln2/2; P = (e^r - 1 - r)/r^2, rel. error
// 2^-26.5 (f32) and 2^-57.2 (f64), which e^r sees scaled down by r^2/2.
constexpr float kExpF32[] = {0x1p-1f,        0x1.555556p-3f,  0x1.5554eap-5f,
                             0x1.11114cp-7f, 0x1.6d42cap-10f, 0x1.a072c2p-13f};
constexpr double kExpF64[] = {
    0x1p-1,
    0x1.5555555555557p-3,
    0x1.555555555554ep-5,
    0x1.11111111100eep-7,
    0x1.6c16c16c1a072p-10,
    0x1.a01a01abdf038p-13,
    0x1.a01a0190629bap-16,
    0x1.71de024b3bb96p-19,
    0x1.27e510d9db77bp-22,
    0x1.af4db8b1d2cb5p-26,
    0x1.1f19f503fcda4p-29,
};

// f32: log1p(f) = f - f^2/2 + f^3 P(f) on f in [√½-1, √2-1]; rel. error of
// P 2^-23.8, i.e. 2^-27.9 in log1p.
constexpr float kLogF32[] = {0x1.555554p-2f,  -0x1.fffff8p-3f, 0x1.999d58p-3f,
                             -0x1.555ca0p-3f, 0x1.23d37ep-3f,  -0x1.fcba9ep-4f,
                             0x1.de4a32p-4f,  -0x1.d7a36cp-4f, 0x1.20437ap-4f};
// f64: log1p(f) = 2 atanh(s), s = f/(2+f); with z = s^2,
// 2 atanh(s) = 2s + s z P(z) on z <= (3-2√2)^2; rel. error of P 2^-50.9,
// i.e. 2^-57.6 in the logarithm.
constexpr double kLogF64[] = {
    0x1.5555555555558p-1, 0x1.99999999952a7p-2, 0x1.2492492df7095p-2, 0x1.c71c62def9b30p-3,
    0x1.7462b65730648p-3, 0x1.39fe2ddcc1703p-3, 0x1.2b5a875510317p-3,
};
// Double-double log for pow: 2 atanh(s) = 2s + (2/3)s^3 + s^5 P(s^2); rel.
// error of P 2^-53.8, i.e. 2^-66 in the logarithm.
constexpr double kLogTailF64[] = {
    0x1.999999999999ap-2, 0x1.2492492492522p-2, 0x1.c71c71c6ea925p-3, 0x1.745d177aa10a4p-3,
    0x1.3b1395ce2d1afp-3, 0x1.1118c89b41629p-3, 0x1.df7ca8253072ep-4, 0x1.e02f95b50f444p-4,
};

// erf(x) = x + x P(x^2) for |x| < 0.875; P = erf(x)/x - 1 (the -1 keeps the
// rounding of 2/√π out of the result). Rel. error in erf 2^-25.3 (f32),
// 2^-55.1 (f64).
constexpr double kErfSmallThreshold = 0.875;
constexpr float kErfSmallF32[] = {0x1.06eba6p-3f,  -0x1.81270cp-2f, 0x1.ce211ep-4f,
                                  -0x1.b6f38ap-6f, 0x1.49c9fep-8f,  -0x1.453aaep-11f};
constexpr double kErfSmallF64[] = {
    0x1.06eba8214db69p-3,  -0x1.812746b0379e4p-2,  0x1.ce2f21a042991p-4,  -0x1.b82ce3127ababp-6,
    0x1.565bcd0bae90cp-8,  -0x1.c02db35e66557p-11, 0x1.f9a30f2ed6408p-14, -0x1.f4d00cfe82b0fp-17,
    0x1.b9c055a48d17cp-20, -0x1.5dca51c101471p-23, 0x1.e517c15ea946bp-27, -0x1.dbd1eac2063aep-31,
};
// f32, 0.875 <= |x| <= 4: erf(x) = 1 - e^Q(x - 1), Q ≈ log(erfc(x)). Centred
// at 1 so that Q is well conditioned where erfc is not negligible; weighted
// error in erf 2^-26.2. Above 4, erfc < 2^-26 and erf rounds to 1.
constexpr float kErfLargeF32[] = {-0x1.d97fc0p+0f, -0x1.51c9b2p+1f, -0x1.afaba4p-1f,
                                  -0x1.545fe4p-5f, 0x1.46d174p-7f,  -0x1.ee7c64p-10f,
                                  0x1.a584e6p-13f};
constexpr float kErfSaturateF32 = 4.0f;
// f64, 0.875 <= |x| <= 6: erf(x) = 1 - e^(-x^2) H(t), t = 1/(1+x), H ≈
// erfcx(x) = e^(x^2) erfc(x), which is entire and so fits short polynomials:
// two pieces in t - centre, split at x = 2.25. Weighted error in erf 2^-55.6
// and 2^-63.1. Above 6, erfc < 2^-54 and erf rounds to 1.
constexpr double kErfSplitF64 = 2.25;
constexpr double kErfMidCentreF64 = 0.421875;
constexpr double kErfMidF64[] = {
    0x1.606927889001cp-2,  0x1.0a50c3d5ce7a7p+0,  0x1.8e28f26f7e35dp-2,  -0x1.ca63d3528aa2ap-2,
    -0x1.4d76a3e812c68p-5, 0x1.b65b5688cce0ap-2,  -0x1.82e421b4a73acp-2, -0x1.4cdf1bed88d4ap-4,
    0x1.3c02cf04ae9b9p-1,  -0x1.8e49b2c11b669p-1, 0x1.050ee817871dfp-2,  0x1.ba69015834034p-1,
    -0x1.f5b5a479cd3d9p+0, 0x1.df05091036f72p+0,
};
constexpr double kErfTailCentreF64 = 0.2265625;
constexpr double kErfTailF64[] = {
    0x1.4580c4a2ad926p-3,  0x1.af2177841100bp-1,  0x1.34f126b703bedp-1,  -0x1.b58c04d0e438ep-3,
    -0x1.21a1d89109b70p-1, 0x1.b8dc745ee1127p-2,  0x1.6f585c6188066p-1,  -0x1.6065a178ba0a0p+0,
    -0x1.4f1463c64610dp-2, 0x1.ea1b850c09443p+1,  -0x1.02037b01a1b6ep+2, -0x1.640577644dcdfp+2,
    0x1.5caf6c1f56390p+4,  -0x1.762265dca8aa0p+4,
};
static_assert(std::size(kErfMidF64) == std::size(kErfTailF64), "pieces share one evaluation");
constexpr double kErfSaturateF64 = 6.0;

// The format being computed in (float or double) and the constants that
// depend on it.
struct Format {
  bool f64;
  unsigned bits;      // 32 or 64
  unsigned mantissa;  // explicit mantissa bits: 23 or 52
  double bias;        // exponent bias
  double min_normal;  // 2^-126 or 2^-1022
  double ln2_hi;      // ln2 rounded; n*ln2_hi is subtracted exactly with fma
  double ln2_lo;      // ln2 - ln2_hi, rounded
  double log2e;
  double exp_min;  // e^x rounds to +0 below this ...
  double exp_max;  // ... and overflows above this
  std::uint64_t sqrt_half_bits;

  double shifter() const { return 0x1.8p0 * static_cast<double>(1ull << mantissa); }
};

constexpr Format kF32 = {.f64 = false,
                         .bits = 32,
                         .mantissa = 23,
                         .bias = 127,
                         .min_normal = 0x1p-126,
                         .ln2_hi = 0x1.62e430p-1,
                         .ln2_lo = -0x1.05c610p-29,
                         .log2e = 0x1.715476p+0,
                         .exp_min = -104,
                         .exp_max = 89,
                         .sqrt_half_bits = 0x3f3504f3};
constexpr Format kF64 = {.f64 = true,
                         .bits = 64,
                         .mantissa = 52,
                         .bias = 1023,
                         .min_normal = 0x1p-1022,
                         .ln2_hi = 0x1.62e42fefa39efp-1,
                         .ln2_lo = 0x1.abc9e3b39803fp-56,
                         .log2e = 0x1.71547652b82fep+0,
                         .exp_min = -746,
                         .exp_max = 710,
                         .sqrt_half_bits = 0x3fe6a09e667f3bcd};

// Thin typed layer over the builder: every value is of `type` (a float or
// double scalar or fixed vector) or of the same-shaped integer type, and
// constants are splatted to that shape.
class Ops {
 public:
  Ops(llvm::IRBuilderBase& b, llvm::Type* type)
      : b_(b),
        type_(type),
        fmt_(type->getScalarType()->isDoubleTy() ? kF64 : kF32),
        int_type_(type->getWithNewType(b.getIntNTy(fmt_.bits))) {
    assert((type->getScalarType()->isFloatTy() || type->getScalarType()->isDoubleTy()) &&
           "math emitters take float or double, scalar or fixed vector");
    assert(!b.getIsFPConstrained() && "math emitters emit plain (unconstrained) FP operations");
  }

  llvm::IRBuilderBase& builder() { return b_; }
  llvm::Type* type() const { return type_; }
  const Format& fmt() const { return fmt_; }

  Value* c(double v) { return llvm::ConstantFP::get(type_, v); }
  Value* ci(std::uint64_t v) { return llvm::ConstantInt::get(int_type_, v); }
  Value* inf() { return llvm::ConstantFP::getInfinity(type_); }
  Value* nan() { return llvm::ConstantFP::getNaN(type_); }

  Value* add(Value* a, Value* x) { return b_.CreateFAdd(a, x); }
  Value* sub(Value* a, Value* x) { return b_.CreateFSub(a, x); }
  Value* mul(Value* a, Value* x) { return b_.CreateFMul(a, x); }
  Value* div(Value* a, Value* x) { return b_.CreateFDiv(a, x); }
  Value* neg(Value* a) { return b_.CreateFNeg(a); }
  Value* fma(Value* a, Value* x, Value* y) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fma, {type_}, {a, x, y});
  }
  Value* abs(Value* a) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a); }
  Value* floor(Value* a) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, a); }
  Value* trunc(Value* a) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, a); }
  Value* sqrt(Value* a) { return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a); }
  // Clamps to a bound x (never NaN): a NaN `a` gives x, as minnum/maxnum
  // do, where the caller fixes NaN lanes afterwards. As a compare and a
  // select, x86's one minps/maxps (minnum/maxnum took three instructions
  // each: min, a NaN test and a blend).
  Value* min(Value* a, Value* x) { return b_.CreateSelect(b_.CreateFCmpOLT(a, x), a, x); }
  Value* max(Value* a, Value* x) { return b_.CreateSelect(b_.CreateFCmpOGT(a, x), a, x); }
  Value* copysign(Value* mag, Value* sign) { return b_.CreateCopySign(mag, sign); }
  Value* select(Value* cond, Value* a, Value* x) { return b_.CreateSelect(cond, a, x); }

  // Ordered comparisons: false when either side is NaN.
  Value* lt(Value* a, Value* x) { return b_.CreateFCmpOLT(a, x); }
  Value* gt(Value* a, Value* x) { return b_.CreateFCmpOGT(a, x); }
  Value* eq(Value* a, Value* x) { return b_.CreateFCmpOEQ(a, x); }
  Value* ne(Value* a, Value* x) { return b_.CreateFCmpONE(a, x); }
  Value* is_nan(Value* a) { return b_.CreateFCmpUNO(a, a); }
  Value* both(Value* p, Value* q) { return b_.CreateAnd(p, q); }
  Value* either(Value* p, Value* q) { return b_.CreateOr(p, q); }

  Value* bits(Value* a) { return b_.CreateBitCast(a, int_type_); }
  Value* from_bits(Value* i) { return b_.CreateBitCast(i, type_); }
  Value* iadd(Value* a, Value* x) { return b_.CreateAdd(a, x); }
  Value* isub(Value* a, Value* x) { return b_.CreateSub(a, x); }
  Value* iand(Value* a, Value* x) { return b_.CreateAnd(a, x); }
  Value* ior(Value* a, Value* x) { return b_.CreateOr(a, x); }
  Value* shl(Value* a, unsigned n) { return b_.CreateShl(a, n); }
  Value* lshr(Value* a, unsigned n) { return b_.CreateLShr(a, n); }
  Value* sign_bit_set(Value* a) { return b_.CreateICmpSLT(bits(a), ci(0)); }

  // Horner's rule with fma, coefficients lowest degree first.
  template <typename T>
  Value* horner(Value* x, std::span<const T> coeffs) {
    Value* acc = c(coeffs.back());
    for (std::size_t i = coeffs.size() - 1; i-- > 0;) acc = fma(acc, x, c(coeffs[i]));
    return acc;
  }
  // Horner's rule whose coefficients are chosen per lane: `first` where
  // `cond` holds, else `second` (one evaluation for two polynomial pieces).
  Value* horner_select(Value* x, Value* cond, std::span<const double> first,
                       std::span<const double> second) {
    assert(first.size() == second.size() && "pieces must have the same degree");
    auto coeff = [&](std::size_t i) { return select(cond, c(first[i]), c(second[i])); };
    Value* acc = coeff(first.size() - 1);
    for (std::size_t i = first.size() - 1; i-- > 0;) acc = fma(acc, x, coeff(i));
    return acc;
  }

 private:
  llvm::IRBuilderBase& b_;
  llvm::Type* type_;
  const Format& fmt_;
  llvm::Type* int_type_;
};

// Error-free transformations (exact with round-to-nearest and fma).
struct Pair {
  Value* hi;
  Value* lo;
};
// a + x = hi + lo exactly, for any a, x.
Pair two_sum(Ops& o, Value* a, Value* x) {
  Value* s = o.add(a, x);
  Value* xv = o.sub(s, a);
  Value* av = o.sub(s, xv);
  return {s, o.add(o.sub(a, av), o.sub(x, xv))};
}
// a + x = hi + lo exactly, when |a| >= |x| (or a == 0).
Pair fast_two_sum(Ops& o, Value* a, Value* x) {
  Value* s = o.add(a, x);
  return {s, o.sub(x, o.sub(s, a))};
}

// 2^k for integral k (held as a float) in the normal exponent range: add the
// biased exponent into the low mantissa bits of 1.5*2^mantissa, then shift it
// into the exponent field. No float-to-int conversion, which AVX2 lacks for
// 64-bit lanes.
Value* pow2i(Ops& o, Value* k) {
  const Format& f = o.fmt();
  Value* t = o.add(k, o.c(f.shifter() + f.bias));
  return o.from_bits(o.shl(o.bits(t), f.mantissa));
}

// p * 2^n for integral n up to twice the exponent range: two exact power-of-
// two factors, so overflow gives inf and a denormal result is rounded once.
// A 512-bit vector in a module for x86 with AVX-512 (kX86Avx512Flag) takes
// one vscalefps / vscalefpd, which rounds p * 2^n once too: the same
// results in fewer instructions (exp over [12, 200, 200] 0.146 -> 0.129
// ms, GELU over [200, 768] 0.094 -> 0.076).
Value* ldexp_wide(Ops& o, Value* p, Value* n) {
  llvm::IRBuilderBase& b = o.builder();
  const auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(o.type());
  if (vector && vector->getPrimitiveSizeInBits() == 512 &&
      b.GetInsertBlock()->getModule()->getModuleFlag(kX86Avx512Flag) != nullptr) {
    const bool f64 = o.fmt().f64;
    return b.CreateIntrinsic(
        f64 ? llvm::Intrinsic::x86_avx512_mask_scalef_pd_512 : llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
        {p, n, llvm::Constant::getNullValue(o.type()), b.getIntN(vector->getNumElements(), ~0ull),
         b.getInt32(4)});  // 4: the current rounding mode (_MM_FROUND_CUR_DIRECTION)
  }
  Value* n1 = o.floor(o.mul(n, o.c(0.5)));
  Value* n2 = o.sub(n, n1);
  return o.mul(o.mul(p, pow2i(o, n1)), pow2i(o, n2));
}

// Cody-Waite reduction: hi + lo = n ln2 + r with |r| <= ln2/2 and
// q = e^r - 1, so e^(hi+lo) = 2^n (1 + q). `hi` is clamped to where e^x is
// still finite and non-zero (the clamp does not change the rounded result);
// NaN lanes come out finite and must be fixed by the caller. `lo` is an
// optional tail below the last bit of `hi` (double-double argument); pass
// nullptr when the argument is a plain value.
struct Reduced {
  Value* q;
  Value* n;
};
Reduced exp_reduce(Ops& o, Value* hi, Value* lo) {
  const Format& f = o.fmt();
  Value* x = o.min(o.max(hi, o.c(f.exp_min)), o.c(f.exp_max));
  // Round x/ln2 to an integer by adding and subtracting 1.5*2^mantissa.
  Value* n = o.sub(o.fma(x, o.c(f.log2e), o.c(f.shifter())), o.c(f.shifter()));
  // Exact: both terms are multiples of ulp(ln2_hi)/2 and |r| < 1/2.
  Value* r_hi = o.fma(n, o.c(-f.ln2_hi), x);
  auto poly = [&](Value* r) {
    return f.f64 ? o.horner(r, std::span<const double>(kExpF64))
                 : o.horner(r, std::span<const float>(kExpF32));
  };
  if (!lo) {
    Value* r = o.fma(n, o.c(-f.ln2_lo), r_hi);
    return {o.fma(o.mul(r, r), poly(r), r), n};
  }
  // A clamped (or NaN) argument leaves the tail meaningless: drop it.
  lo = o.select(o.eq(x, hi), lo, o.c(0));
  Pair r = two_sum(o, r_hi, o.fma(n, o.c(-f.ln2_lo), lo));
  // e^(rh+rl) - 1 = rh + rl + rh^2 P(rh) up to terms of order rl*rh.
  Value* q = o.add(r.hi, o.fma(o.mul(r.hi, r.hi), poly(r.hi), r.lo));
  return {q, n};
}

// e^(hi+lo) for non-NaN arguments.
Value* exp_value(Ops& o, Value* hi, Value* lo) {
  Reduced e = exp_reduce(o, hi, lo);
  return ldexp_wide(o, o.add(e.q, o.c(1)), e.n);
}

// A positive normal x as 2^k z with z in [√½, √2), split by integer
// arithmetic on the bits (musl's offset trick), k held as a float. Only
// logical shifts, so 64-bit lanes stay within AVX2.
struct LogSplit {
  Value* z;
  Value* k;
};
LogSplit split_log(Ops& o, Value* x) {
  const Format& f = o.fmt();
  const std::uint64_t half_range = 1ull << (f.bits - 2);  // keeps the offset sum non-negative
  Value* ix = o.bits(x);
  Value* u = o.iadd(o.isub(ix, o.ci(f.sqrt_half_bits)), o.ci(half_range));
  Value* kb = o.lshr(u, f.mantissa);  // k + half_range / 2^mantissa
  Value* high = o.iand(u, o.ci(~((1ull << f.mantissa) - 1)));
  Value* z = o.from_bits(o.iadd(o.isub(ix, high), o.ci(half_range)));
  // kb is a small integer: or it into the mantissa of 2^mantissa to convert.
  const double two_m = static_cast<double>(1ull << f.mantissa);
  Value* kb_float = o.from_bits(o.ior(kb, o.bits(o.c(two_m))));
  Value* k = o.sub(kb_float, o.c(two_m + static_cast<double>(half_range >> f.mantissa)));
  return {z, k};
}

// x scaled into the normal range if it is denormal, with the exponent to add
// back: logarithms of denormals are then as accurate as of normals.
struct Normalized {
  Value* x;
  Value* k_adjust;
};
Normalized normalize(Ops& o, Value* x) {
  const Format& f = o.fmt();
  const unsigned shift = f.mantissa + 2;  // any shift past the mantissa width
  Value* tiny = o.lt(x, o.c(f.min_normal));
  return {o.select(tiny, o.mul(x, o.c(static_cast<double>(1ull << shift))), x),
          o.select(tiny, o.c(-static_cast<double>(shift)), o.c(0))};
}

// log(x) for positive finite x (other lanes produce garbage, fixed by the
// caller).
Value* log_value(Ops& o, Value* x) {
  const Format& f = o.fmt();
  Normalized n = normalize(o, x);
  LogSplit split = split_log(o, n.x);
  Value* k = o.add(split.k, n.k_adjust);
  Value* m = o.sub(split.z, o.c(1));  // exact (Sterbenz)
  if (!f.f64) {
    // log1p(m) = m - m^2/2 + m^3 P(m); the m^2/2 term is folded into an fma
    // so that it is not rounded separately.
    Value* m3p = o.mul(o.mul(o.mul(m, m), m), o.horner(m, std::span<const float>(kLogF32)));
    Value* t = o.fma(k, o.c(f.ln2_lo), m3p);
    Value* y = o.fma(o.mul(m, o.c(-0.5)), m, t);
    return o.fma(k, o.c(f.ln2_hi), o.add(m, y));
  }
  // fdlibm's arrangement: log1p(m) = m - (hfsq - s (hfsq + R)), s = m/(2+m).
  Value* s = o.div(m, o.add(m, o.c(2)));
  Value* z = o.mul(s, s);
  Value* r = o.mul(z, o.horner(z, std::span<const double>(kLogF64)));
  Value* hfsq = o.mul(o.mul(m, m), o.c(0.5));
  Value* t = o.fma(s, o.add(hfsq, r), o.mul(k, o.c(f.ln2_lo)));
  return o.fma(k, o.c(f.ln2_hi), o.sub(m, o.sub(hfsq, t)));
}

// log(x) as a double-double (relative error about 2^-64) for positive finite
// x, in double. pow needs it: y*log(x) is exponentiated, so its absolute
// error, up to 745 * the relative error of the log, becomes relative error.
Pair log_double_double(Ops& o, Value* x) {
  const Format& f = o.fmt();
  assert(f.f64 && "double-double log is for double");
  Normalized n = normalize(o, x);
  LogSplit split = split_log(o, n.x);
  Value* k = o.add(split.k, n.k_adjust);
  Value* m = o.sub(split.z, o.c(1));  // exact (Sterbenz)
  // s = m / (2 + m) as sh + sl: 2 + m is exactly d + dl.
  Pair d = fast_two_sum(o, o.c(2), m);
  Value* sh = o.div(m, d.hi);
  Value* rem = o.fma(o.neg(sh), d.hi, m);  // exact
  rem = o.fma(o.neg(sh), d.lo, rem);
  Value* sl = o.div(rem, d.hi);
  // s^2 and s^3 as double-doubles.
  Value* s2h = o.mul(sh, sh);
  Value* s2l = o.fma(o.mul(sh, o.c(2)), sl, o.fma(sh, sh, o.neg(s2h)));
  Value* s3h = o.mul(s2h, sh);
  Value* s3l = o.fma(s2l, sh, o.fma(s2h, sl, o.fma(s2h, sh, o.neg(s3h))));
  // (2/3) s^3 as a double-double; 2/3 = c23h + c23l.
  constexpr double c23h = 0x1.5555555555555p-1, c23l = 0x1.5555555555555p-55;
  Value* t2h = o.mul(o.c(c23h), s3h);
  Value* t2l = o.fma(o.c(c23l), s3h, o.fma(o.c(c23h), s3l, o.fma(o.c(c23h), s3h, o.neg(t2h))));
  // The s^5 tail weighs at most 2^-12 of the result: plain double suffices.
  Value* t3 = o.mul(o.mul(s3h, s2h), o.horner(s2h, std::span<const double>(kLogTailF64)));
  // log(z) = 2s + (2/3)s^3 + s^5 P(s^2), then + k ln2 (k ln2_hi exact via fma).
  Pair a = fast_two_sum(o, o.mul(sh, o.c(2)), t2h);
  Value* a_lo = o.add(o.add(a.lo, o.mul(sl, o.c(2))), o.add(t2l, t3));
  Value* kh = o.mul(k, o.c(f.ln2_hi));
  Value* kl = o.fma(k, o.c(f.ln2_lo), o.fma(k, o.c(f.ln2_hi), o.neg(kh)));
  Pair l = two_sum(o, kh, a.hi);
  return fast_two_sum(o, l.hi, o.add(l.lo, o.add(kl, a_lo)));
}

// Run `emit` with the builder's fast-math flags cleared.
template <typename F>
Value* without_fast_math(llvm::IRBuilderBase& b, F&& emit) {
  llvm::IRBuilderBase::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  return emit();
}

// The same-shaped double type, for the f32 functions computed in double.
llvm::Type* as_double(llvm::IRBuilderBase& b, llvm::Type* type) {
  return type->getWithNewType(b.getDoubleTy());
}

// |x|^y for finite non-zero |x| and finite y, in double. `extended` takes
// y*log|x| as a double-double, which a double result needs (the absolute
// error of y*log|x| becomes relative error of the result, and |y*log|x||
// reaches 745); for a float result (|y*log|x|| <= 104 matters) plain double
// is already 2^-45 accurate.
Value* pow_magnitude(Ops& o, Value* ax, Value* y, bool extended) {
  if (!extended) return exp_value(o, o.mul(y, log_value(o, ax)), nullptr);
  Pair l = log_double_double(o, ax);
  Value* th = o.mul(y, l.hi);
  Value* tl = o.fma(y, l.lo, o.fma(y, l.hi, o.neg(th)));
  return exp_value(o, th, tl);
}

// pow with every special case of C99 Annex F, in x's type; `magnitude`
// computes |x|^y for the lanes where |x| is finite non-zero and y finite
// (it is given sanitized operands elsewhere, and its result there is
// overwritten).
template <typename Magnitude>
Value* pow_with_special_cases(Ops& o, Value* x, Value* y, Magnitude&& magnitude) {
  Value* one = o.c(1);
  Value* zero = o.c(0);
  Value* ax = o.abs(x);
  Value* ay = o.abs(y);
  Value* x_finite_nonzero = o.both(o.lt(ax, o.inf()), o.gt(ax, zero));
  Value* y_finite = o.lt(ay, o.inf());
  Value* r = magnitude(o.select(x_finite_nonzero, ax, one), o.select(y_finite, y, zero));
  // x = ±0 or ±inf (y finite): inf exactly when (x == 0) == (y < 0), else 0.
  Value* y_neg = o.lt(y, zero);
  Value* zero_or_inf = o.select(o.builder().CreateICmpEQ(o.eq(ax, zero), y_neg), o.inf(), zero);
  r = o.select(x_finite_nonzero, r, zero_or_inf);
  // y = ±inf: 1 for |x| == 1, else inf exactly when (|x| < 1) == (y < 0).
  Value* y_inf_mag = o.select(o.builder().CreateICmpEQ(o.lt(ax, one), y_neg), o.inf(), zero);
  y_inf_mag = o.select(o.eq(ax, one), one, y_inf_mag);
  r = o.select(o.eq(ay, o.inf()), y_inf_mag, r);
  // Sign: a negative base (including -0 and -inf) to an odd integer power.
  Value* y_int = o.eq(o.trunc(y), y);
  Value* half_y = o.mul(y, o.c(0.5));
  Value* y_odd = o.both(y_int, o.ne(o.trunc(half_y), half_y));
  r = o.select(o.both(o.sign_bit_set(x), y_odd), o.neg(r), r);
  // A negative finite base to a non-integer finite power.
  Value* x_neg_finite = o.both(o.lt(x, zero), o.gt(x, o.neg(o.inf())));
  Value* y_fraction = o.both(y_finite, o.builder().CreateNot(y_int));
  r = o.select(o.both(x_neg_finite, y_fraction), o.nan(), r);
  r = o.select(o.either(o.is_nan(x), o.is_nan(y)), o.nan(), r);
  return o.select(o.either(o.eq(y, zero), o.eq(x, one)), one, r);
}

// fmod in double, exact for operands of a format whose exponents span
// [min_exp, max_exp] (ilogb of the smallest denormal and of the largest
// finite value).
//
// Each step reduces r modulo Y = |y| 2^m, the largest such multiple of |y|
// with |r/Y| < 2^53. q = trunc(r/Y) is then the true quotient or one more in
// magnitude (rounding never passes a representable integer), so r - qY lies
// in (-Y, Y) on the grid of ulp(Y): the fma computes it exactly. The
// remainder may go negative; it stays congruent to x mod |y|, and one +|y|
// at the end fixes the sign. Every step drops ilogb(r) by at least 52 until
// Y = |y|, so a fixed number of steps is exact for all inputs: no loop, no
// branch. The chain is latency-bound (a division per step).
Value* fmod_double(Ops& o, Value* x, Value* y, int min_exp, int max_exp) {
  const int steps = (max_exp - min_exp - 52 + 51) / 52 + 1;
  Value* ax = o.abs(x);
  Value* ay = o.abs(y);
  Value* r = o.select(o.lt(ax, o.inf()), ax, o.c(0));
  Value* ys = o.select(o.both(o.gt(ay, o.c(0)), o.lt(ay, o.inf())), ay, o.c(1));
  // The significand of |y| in [1, 2) (a denormal |y| normalized first),
  // times 2^-52: times 2^ilogb(r) it is |y| 2^(ilogb(r) - 52 - ilogb(y)).
  Value* yn = o.select(o.lt(ys, o.c(0x1p-1022)), o.mul(ys, o.c(0x1p54)), ys);
  Value* my = o.from_bits(o.ior(o.iand(o.bits(yn), o.ci(0x000fffffffffffffull)),
                                o.ci(0x3cb0000000000000ull)));  // exponent of 2^-52
  for (int i = 0; i < steps; ++i) {
    // 2^ilogb(r), or 0 when r is denormal (then |r/y| < 2^53 already).
    Value* pow2_r = o.from_bits(o.iand(o.bits(r), o.ci(0x7ff0000000000000ull)));
    // Exact whenever it is >= |y| (it is then |y| 2^m); otherwise |y| is used.
    Value* yc = o.mul(my, pow2_r);
    Value* big_y = o.select(o.gt(yc, ys), yc, ys);
    Value* q = o.trunc(o.div(r, big_y));
    r = o.fma(o.neg(q), big_y, r);
  }
  r = o.select(o.lt(r, o.c(0)), o.add(r, ys), r);
  Value* res = o.copysign(r, x);
  res = o.select(o.both(o.eq(ay, o.inf()), o.lt(ax, o.inf())), x, res);
  Value* invalid =
      o.either(o.either(o.is_nan(x), o.is_nan(y)), o.either(o.eq(ax, o.inf()), o.eq(ay, o.c(0))));
  return o.select(invalid, o.nan(), res);
}

}  // namespace

Value* emit_exp(llvm::IRBuilderBase& b, Value* x) {
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    return o.select(o.is_nan(x), x, exp_value(o, x, nullptr));
  });
}

Value* emit_log(llvm::IRBuilderBase& b, Value* x) {
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    Value* r = log_value(o, x);
    r = o.select(o.eq(x, o.c(0)), o.neg(o.inf()), r);
    r = o.select(o.eq(x, o.inf()), o.inf(), r);
    r = o.select(o.lt(x, o.c(0)), o.nan(), r);
    return o.select(o.is_nan(x), x, r);
  });
}

Value* emit_tanh(llvm::IRBuilderBase& b, Value* x) {
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    // Past this, 1 - tanh(x) is below half an ulp of 1: tanh rounds to 1.
    const double saturate = o.fmt().f64 ? 20.0 : 10.0;
    Value* a = o.min(o.abs(x), o.c(saturate));
    // u = expm1(2a) = 2^n (1 + q) - 1 = fma(2^n, q, 2^n - 1): one rounding,
    // and for n = 0 it is q itself, accurate relative to tiny a.
    Reduced e = exp_reduce(o, o.add(a, a), nullptr);
    Value* p = pow2i(o, e.n);
    Value* u = o.fma(p, e.q, o.sub(p, o.c(1)));
    Value* t = o.div(u, o.add(u, o.c(2)));
    return o.select(o.is_nan(x), x, o.copysign(t, x));
  });
}

Value* emit_sigmoid(llvm::IRBuilderBase& b, Value* x) {
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    // e = e^-|x| never overflows; sigmoid = 1/(1+e) for x >= 0, e/(1+e) below.
    Value* e = exp_value(o, o.neg(o.abs(x)), nullptr);
    Value* num = o.select(o.lt(x, o.c(0)), e, o.c(1));
    Value* s = o.div(num, o.add(e, o.c(1)));
    return o.select(o.is_nan(x), x, s);
  });
}

Value* emit_erf(llvm::IRBuilderBase& b, Value* x) {
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    const bool f64 = o.fmt().f64;
    Value* a = o.abs(x);
    Value* z = o.mul(a, a);
    Value* small = f64 ? o.horner(z, std::span<const double>(kErfSmallF64))
                       : o.horner(z, std::span<const float>(kErfSmallF32));
    small = o.fma(a, small, a);
    Value* large = nullptr;
    if (!f64) {
      Value* am = o.min(a, o.c(kErfSaturateF32));
      Value* q = o.horner(o.sub(am, o.c(1)), std::span<const float>(kErfLargeF32));
      large = o.sub(o.c(1), exp_value(o, q, nullptr));
    } else {
      Value* am = o.min(o.max(a, o.c(kErfSmallThreshold)), o.c(kErfSaturateF64));
      Value* t = o.div(o.c(1), o.add(am, o.c(1)));
      Value* mid = o.lt(am, o.c(kErfSplitF64));
      Value* centre = o.select(mid, o.c(kErfMidCentreF64), o.c(kErfTailCentreF64));
      Value* h = o.horner_select(o.sub(t, centre), mid, kErfMidF64, kErfTailF64);
      // e^(-am^2) with am^2 as an exact double-double.
      Value* sq = o.mul(am, am);
      Value* sq_lo = o.fma(am, am, o.neg(sq));
      Value* e = exp_value(o, o.neg(sq), o.neg(sq_lo));
      large = o.fma(o.neg(e), h, o.c(1));
    }
    Value* r = o.select(o.lt(a, o.c(kErfSmallThreshold)), small, large);
    return o.select(o.is_nan(x), x, o.copysign(r, x));
  });
}

Value* emit_neg(llvm::IRBuilderBase& b, Value* x) { return b.CreateFNeg(x); }
Value* emit_abs(llvm::IRBuilderBase& b, Value* x) {
  return b.CreateIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
}
Value* emit_sqrt(llvm::IRBuilderBase& b, Value* x) {
  return b.CreateIntrinsic(llvm::Intrinsic::sqrt, {x->getType()}, {x});
}
Value* emit_floor(llvm::IRBuilderBase& b, Value* x) {
  return b.CreateIntrinsic(llvm::Intrinsic::floor, {x->getType()}, {x});
}
Value* emit_ceil(llvm::IRBuilderBase& b, Value* x) {
  return b.CreateIntrinsic(llvm::Intrinsic::ceil, {x->getType()}, {x});
}

Value* emit_log1p(llvm::IRBuilderBase& b, Value* x) {
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    // u + e = 1 + x exactly (two_sum), so log1p(x) = log(u) + log1p(e / u),
    // and |e / u| is below half an ulp: log1p(e / u) is e / u to well within
    // the result's rounding. Where x is tiny, u = 1, log(u) = 0 and e = x.
    Pair s = two_sum(o, o.c(1), x);
    Value* positive = o.gt(s.hi, o.c(0));
    Value* finite = o.lt(s.hi, o.inf());
    Value* u = o.select(o.both(positive, finite), s.hi, o.c(1));  // other lanes fixed below
    Value* r = o.add(log_value(o, u), o.div(s.lo, u));
    r = o.select(o.eq(x, o.c(-1)), o.neg(o.inf()), r);
    r = o.select(o.lt(x, o.c(-1)), o.nan(), r);
    r = o.select(o.eq(x, o.inf()), o.inf(), r);
    r = o.select(o.eq(x, o.c(0)), x, r);  // the sign of zero
    return o.select(o.is_nan(x), x, r);
  });
}

Value* emit_rsqrt(llvm::IRBuilderBase& b, Value* x) {
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    return o.div(o.c(1), o.sqrt(x));
  });
}

Value* emit_pow(llvm::IRBuilderBase& b, Value* x, Value* y) {
  assert(x->getType() == y->getType() && "pow operands must have the same type");
  return without_fast_math(b, [&] {
    Ops o(b, x->getType());
    if (o.fmt().f64)
      return pow_with_special_cases(o, x, y, [&](Value* ax, Value* ys) {
        return pow_magnitude(o, ax, ys, /*extended=*/true);
      });
    // f32: the magnitude in double, whose error (~2^-45) is far below the
    // final rounding to float; the special cases stay in float (half the
    // vector registers of double).
    return pow_with_special_cases(o, x, y, [&](Value* ax, Value* ys) {
      Ops d(b, as_double(b, o.type()));
      Value* r = pow_magnitude(d, b.CreateFPExt(ax, d.type()), b.CreateFPExt(ys, d.type()),
                               /*extended=*/false);
      return b.CreateFPTrunc(r, o.type());
    });
  });
}

Value* emit_fmod(llvm::IRBuilderBase& b, Value* x, Value* y) {
  assert(x->getType() == y->getType() && "fmod operands must have the same type");
  return without_fast_math(b, [&] {
    llvm::Type* type = x->getType();
    if (type->getScalarType()->isDoubleTy()) {
      Ops o(b, type);
      return fmod_double(o, x, y, -1074, 1023);
    }
    // f32 in double: every f32 is a normal double and each step takes 52
    // bits instead of 23. The result is an f32 value, so the truncation is
    // exact.
    Ops o(b, as_double(b, type));
    Value* r = fmod_double(o, b.CreateFPExt(x, o.type()), b.CreateFPExt(y, o.type()), -149, 127);
    return b.CreateFPTrunc(r, type);
  });
}

}  // namespace nimble::codegen
