// Element types of tensors, and the 16-bit float storage types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace nimble {

/// The element type of a tensor. `boolean` is stored as one byte (0 or 1).
enum class DType : std::uint8_t { f32, f64, f16, bf16, i8, i32, i64, boolean };

/// Every DType, in declaration order (for tests and tables).
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i8,  DType::i32, DType::i64, DType::boolean};

/// Size of one element in bytes.
[[nodiscard]] constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::i8:
    case DType::boolean: return 1;
  }
  return 0;
}

[[nodiscard]] constexpr bool is_floating(DType t) noexcept {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
[[nodiscard]] constexpr bool is_integer(DType t) noexcept {
  return t == DType::i8 || t == DType::i32 || t == DType::i64;
}

/// The short name used in IR text and messages: "f32", "bool", ...
[[nodiscard]] std::string_view to_string(DType t) noexcept;
/// Parses a name produced by to_string(DType); nullopt if it is not one.
[[nodiscard]] std::optional<DType> parse_dtype(std::string_view name) noexcept;

/// IEEE 754 binary16, as stored in memory. Conversions round to nearest even.
struct Half {
  std::uint16_t bits = 0;
  Half() = default;
  explicit Half(float value) noexcept;
  explicit operator float() const noexcept;
  [[nodiscard]] static constexpr Half from_bits(std::uint16_t b) noexcept {
    Half h;
    h.bits = b;
    return h;
  }
};

/// bfloat16 (the upper half of an IEEE binary32). Conversions round to nearest even.
struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value) noexcept;
  explicit operator float() const noexcept;
  [[nodiscard]] static constexpr BFloat16 from_bits(std::uint16_t b) noexcept {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

/// Maps a C++ element type to its DType: dtype_of<float> == DType::f32.
template <class T>
inline constexpr bool is_element_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
    std::is_same_v<T, BFloat16> || std::is_same_v<T, std::int8_t> ||
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool>;

template <class T>
  requires is_element_type_v<T>
inline constexpr DType dtype_of = std::is_same_v<T, float>          ? DType::f32
                                  : std::is_same_v<T, double>       ? DType::f64
                                  : std::is_same_v<T, Half>         ? DType::f16
                                  : std::is_same_v<T, BFloat16>     ? DType::bf16
                                  : std::is_same_v<T, std::int8_t>  ? DType::i8
                                  : std::is_same_v<T, std::int32_t> ? DType::i32
                                  : std::is_same_v<T, std::int64_t> ? DType::i64
                                                                    : DType::boolean;

}  // namespace nimble
