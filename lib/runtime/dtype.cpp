#include "nimble/runtime/dtype.hpp"

#include <bit>
#include <cstring>

namespace nimble {

std::string_view to_string(DType t) noexcept {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (DType t : kAllDTypes)
    if (to_string(t) == name) return t;
  return std::nullopt;
}

// binary32 -> binary16, round to nearest even; overflow gives infinity, NaN
// stays a (quiet) NaN, tiny values become subnormals or zero.
Half::Half(float value) noexcept {
  const auto f = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t abs = f & 0x7fffffffu;
  std::uint32_t h;
  if (abs >= 0x7f800000u) {                      // inf or NaN
    h = abs > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (abs >= 0x477ff000u) {               // rounds to >= 65520: overflow
    h = 0x7c00u;
  } else if (abs < 0x38800000u) {                // below the smallest normal half (2^-14)
    // Subnormal: value = m * 2^-24. Add the implicit bit and shift with RNE.
    const int exp = static_cast<int>(abs >> 23);
    if (exp < 102) {                             // < 2^-25: rounds to zero
      h = 0;
    } else {
      const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
      // value = mant * 2^(exp-150) and the subnormal unit is 2^-24, so the
      // result is mant >> (126 - exp), rounded.
      const int shift = 126 - exp;
      const std::uint32_t rounded = mant >> shift;
      const std::uint32_t rem = mant & ((1u << shift) - 1u);
      const std::uint32_t halfway = 1u << (shift - 1);
      h = rounded + ((rem > halfway || (rem == halfway && (rounded & 1u))) ? 1u : 0u);
    }
  } else {
    // Normal: rebias exponent (127 -> 15) and round the 13 dropped bits.
    const std::uint32_t rebased = abs - 0x38000000u;
    h = rebased >> 13;
    const std::uint32_t rem = rebased & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into exponent: fine
  }
  bits = static_cast<std::uint16_t>(sign | h);
}

Half::operator float() const noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  std::uint32_t mant = bits & 0x3ffu;
  std::uint32_t f;
  if (exp == 0x1f) {
    f = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    f = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    f = sign;
  } else {  // subnormal half: normalize
    int e = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    f = sign | (static_cast<std::uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(f);
}

BFloat16::BFloat16(float value) noexcept {
  const auto f = std::bit_cast<std::uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a quiet NaN
    bits = static_cast<std::uint16_t>((f >> 16) | 0x40u);
    return;
  }
  const std::uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  bits = static_cast<std::uint16_t>((f + rounding) >> 16);
}

BFloat16::operator float() const noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace nimble
