#include "nimble/runtime/dtype.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

using namespace nimble;

TEST_CASE("dtype sizes, names and parsing", "[runtime]") {
  CHECK(dtype_size(DType::f32) == 4);
  CHECK(dtype_size(DType::f64) == 8);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::i8) == 1);
  CHECK(dtype_size(DType::i32) == 4);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(dtype_size(DType::boolean) == 1);
  for (DType t : kAllDTypes) CHECK(parse_dtype(to_string(t)) == t);
  CHECK(to_string(DType::boolean) == "bool");
  CHECK_FALSE(parse_dtype("float32").has_value());
  CHECK_FALSE(parse_dtype("").has_value());
  CHECK(is_floating(DType::bf16));
  CHECK_FALSE(is_floating(DType::i32));
  CHECK(is_integer(DType::i8));
  CHECK_FALSE(is_integer(DType::boolean));
  STATIC_REQUIRE(dtype_of<float> == DType::f32);
  STATIC_REQUIRE(dtype_of<Half> == DType::f16);
  STATIC_REQUIRE(dtype_of<bool> == DType::boolean);
  STATIC_REQUIRE(dtype_of<std::int64_t> == DType::i64);
}

TEST_CASE("Half converts with round-to-nearest-even", "[runtime]") {
  CHECK(Half(1.0f).bits == 0x3c00);
  CHECK(Half(-2.0f).bits == 0xc000);
  CHECK(Half(65504.0f).bits == 0x7bff);  // largest finite half
  CHECK(Half(65519.0f).bits == 0x7bff);  // rounds down
  CHECK(Half(65520.0f).bits == 0x7c00);  // halfway to 65536: rounds to even = infinity
  CHECK(Half(std::numeric_limits<float>::infinity()).bits == 0x7c00);
  CHECK(std::isnan(static_cast<float>(Half(std::nanf("")))));
  CHECK(Half(std::ldexp(1.0f, -24)).bits == 0x0001);   // smallest subnormal
  CHECK(Half(std::ldexp(1.0f, -25)).bits == 0x0000);   // halfway to it: ties to even (0)
  CHECK(Half(std::ldexp(1.5f, -25)).bits == 0x0001);   // above halfway: rounds up
  CHECK(Half(std::ldexp(1.0f, -14)).bits == 0x0400);   // smallest normal
  CHECK(Half(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);  // tie: to even (down)
  CHECK(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3c02);  // tie: to even (up)

  // Every finite half survives half -> float -> half.
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const Half h = Half::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    if (std::isnan(f)) continue;
    REQUIRE(Half(f).bits == h.bits);
  }
}

TEST_CASE("BFloat16 converts with round-to-nearest-even", "[runtime]") {
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(static_cast<float>(BFloat16::from_bits(0x4049)) == 3.140625f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (down).
  CHECK(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);
  CHECK(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits == 0x3f82);
  CHECK(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = BFloat16::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    if (std::isnan(f)) continue;
    REQUIRE(BFloat16(f).bits == h.bits);
  }
}
