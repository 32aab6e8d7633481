// Dtype dispatch and per-element conversions for runtime code that handles
// tensors of any dtype (printing, comparison, fill). Not for hot kernels.
#pragma once

#include <cstdint>
#include <type_traits>

#include "nimble/runtime/dtype.hpp"

namespace nimble {

/// Calls `fn(T{})` with the C++ element type of `dtype`.
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::f16: return fn(Half{});
    case DType::bf16: return fn(BFloat16{});
    case DType::i8: return fn(std::int8_t{});
    case DType::i32: return fn(std::int32_t{});
    case DType::i64: return fn(std::int64_t{});
    case DType::boolean: return fn(bool{});
  }
  return fn(float{});  // unreachable: every enumerator is handled above
}

template <class T>
double to_double(T value) noexcept {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return static_cast<double>(static_cast<float>(value));
  else
    return static_cast<double>(value);
}

/// Element `i` of the array of `dtype` at `base`, as a double.
inline double load_as_double(const void* base, DType dtype, std::int64_t i) noexcept {
  return visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    return to_double(static_cast<const T*>(base)[i]);
  });
}

/// Converts `value` to `dtype` as static_cast would; throws Error(invalid_argument)
/// if it is NaN, infinite or out of range for an integer dtype. Writes one
/// element to `out`.
void store_from_double(void* out, DType dtype, double value);

}  // namespace nimble
