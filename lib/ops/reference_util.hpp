// Helpers shared by the reference kernels of lib/ops (ir::ReferenceKernel):
// argument access, fresh results, dtype dispatch, element conversions, and
// iteration over shapes known only at run time (broadcasting, one axis, a set
// of reduced axes). Clear rather than fast: the JIT is the fast path.
//
// Element arithmetic, shared by every family:
//  - floating-point elements compute in double and round once to their dtype
//    (f16/bf16 through f32);
//  - integers wrap in two's complement (as PyTorch), computed through
//    uint64 so that nothing is undefined behaviour;
//  - messages name run-time shapes as "[2, 3]" and arguments as the op's
//    arg_names do, never the op (the caller adds it).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/runtime/tensor.hpp"
#include "nimble/runtime/value.hpp"
#include "runtime/element.hpp"
#include "support/check.hpp"

namespace nimble::ops::ref {

// --- arguments and results --------------------------------------------------------

/// Argument `i` as a tensor (Value::tensor() throws type_error for anything else).
[[nodiscard]] inline const Tensor& tensor_arg(std::span<const Value> args, std::size_t i) {
  NIMBLE_ASSERT(i < args.size(), "reference kernel: missing argument");
  return args[i].tensor();
}

/// A fresh, uninitialized result: the kernel writes every element.
[[nodiscard]] inline Tensor fresh(nimble::Shape shape, DType dtype) {
  return Tensor::empty(std::move(shape), dtype);
}

[[nodiscard]] inline nimble::Shape make_shape(const std::vector<std::int64_t>& dims) {
  return nimble::Shape(std::span<const std::int64_t>(dims));
}

[[nodiscard]] inline std::vector<std::int64_t> dims_of(const nimble::Shape& shape) {
  return {shape.begin(), shape.end()};
}

/// The multi-index of flat (row-major) element `flat` of `shape`: "[1, 2]".
[[nodiscard]] inline std::string index_string(const nimble::Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> index(shape.rank(), 0);
  for (std::size_t d = shape.rank(); d-- > 0;) {
    if (shape[d] == 0) break;
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(index, ", "));
}

/// The i64 elements of a run-time vector or scalar (a shape, bounds, an offset).
[[nodiscard]] inline std::vector<std::int64_t> i64_values(const Tensor& t, std::string_view name) {
  if (t.dtype() != DType::i64)
    throw_error(ErrorKind::type_error, "{} must be i64, got {}", name, to_string(t.dtype()));
  const auto values = t.values<std::int64_t>();
  return {values.begin(), values.end()};
}

// --- element types ----------------------------------------------------------------------

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

/// Which element types a kernel takes (its type relation's rule).
enum class Accepts : std::uint8_t { floating, numeric, integer, boolean, any };

template <Accepts kAccepts, class T>
inline constexpr bool accepts_v = kAccepts == Accepts::any ||
                                  (kAccepts == Accepts::floating && is_float_v<T>) ||
                                  (kAccepts == Accepts::numeric && !std::is_same_v<T, bool>) ||
                                  (kAccepts == Accepts::integer && is_int_v<T>) ||
                                  (kAccepts == Accepts::boolean && std::is_same_v<T, bool>);

/// Calls `fn(T{})` for the element type of `dtype` if the kernel takes it;
/// otherwise throws Error(type_error) naming argument `name` (the type
/// relation rejects such calls, so only a direct call gets here).
template <Accepts kAccepts, class Fn>
void dispatch(DType dtype, std::string_view name, Fn&& fn) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (accepts_v<kAccepts, T>)
      fn(tag);
    else
      throw_error(ErrorKind::type_error, "{} of dtype {} is not supported here", name,
                  to_string(dtype));
  });
}

/// Rounds a double to floating-point T (f16/bf16 through f32).
template <class T>
[[nodiscard]] T from_double(double v) noexcept {
  if constexpr (is_half_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// An element in a type C++ can compare and compute with natively (f16/bf16 as float).
template <class T>
[[nodiscard]] auto widen(T v) noexcept {
  if constexpr (is_half_v<T>)
    return static_cast<float>(v);
  else
    return v;
}

/// The integer T whose two's-complement bits are the low bits of `bits`.
template <class T>
[[nodiscard]] T wrap(std::uint64_t bits) noexcept {
  return static_cast<T>(static_cast<std::int64_t>(bits));  // modular since C++20
}

/// Converts one element as the cast op does: floating to integer truncates
/// toward zero and saturates (NaN -> 0, ±inf and out-of-range values -> the
/// nearest limit); integer to integer wraps; anything to bool is `!= 0` (NaN
/// is true); bool is 0 or 1; floating to floating rounds to nearest.
template <class To, class From>
[[nodiscard]] To convert(From v) noexcept {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return widen(v) != 0;
  } else if constexpr (is_float_v<To>) {
    if constexpr (is_float_v<From>)
      return from_double<To>(to_double(v));
    else if constexpr (is_half_v<To>)
      return To(static_cast<float>(v));
    else
      return static_cast<To>(v);  // one correct rounding from the integer
  } else if constexpr (is_float_v<From>) {
    const double d = to_double(v);
    const double limit = -static_cast<double>(std::numeric_limits<To>::min());  // 2^(bits-1)
    if (std::isnan(d)) return To{0};
    if (d >= limit) return std::numeric_limits<To>::max();
    if (d <= -limit) return std::numeric_limits<To>::min();
    return static_cast<To>(d);
  } else {
    return static_cast<To>(v);  // integer or bool to integer: modular
  }
}

// --- broadcasting -------------------------------------------------------------------------

/// One input of a broadcast, named as its op names it.
struct Operand {
  std::string_view name;
  const nimble::Shape* shape;
};

/// The numpy broadcast of the run-time shapes of `operands`; throws
/// Error(invalid_argument) naming the two that conflict, with the dim
/// numbered in the result: "a [2, 3] and b [4, 3] do not broadcast: dim 0 is 2 vs 4".
[[nodiscard]] inline nimble::Shape broadcast_shapes(std::span<const Operand> operands) {
  std::size_t rank = 0;
  for (const Operand& operand : operands) rank = std::max(rank, operand.shape->rank());
  std::vector<std::int64_t> result(rank, 1);
  for (std::size_t d = 0; d < rank; ++d) {
    std::size_t source = 0;  // the operand whose extent (!= 1) the result holds
    for (std::size_t i = 0; i < operands.size(); ++i) {
      const nimble::Shape& s = *operands[i].shape;
      if (d + s.rank() < rank) continue;  // an implicit leading 1
      const std::int64_t extent = s[d + s.rank() - rank];
      if (extent == result[d] || extent == 1) continue;
      if (result[d] != 1)
        throw_error(ErrorKind::invalid_argument,
                    "{} {} and {} {} do not broadcast: dim {} is {} vs {}", operands[source].name,
                    to_string(*operands[source].shape), operands[i].name, to_string(s), d,
                    result[d], extent);
      result[d] = extent;
      source = i;
    }
  }
  return make_shape(result);
}

/// Element strides of `in` read as the broadcast shape `out`: 0 along the
/// dims `in` broadcasts (extent 1 or missing).
[[nodiscard]] inline std::vector<std::int64_t> broadcast_strides(const nimble::Shape& in,
                                                                 const nimble::Shape& out) {
  NIMBLE_ASSERT(in.rank() <= out.rank(), "broadcast_strides: input has a higher rank");
  std::vector<std::int64_t> strides(out.rank(), 0);
  std::int64_t stride = 1;
  for (std::size_t k = in.rank(); k-- > 0;) {
    if (in[k] != 1) strides[k + out.rank() - in.rank()] = stride;
    stride *= in[k];
  }
  return strides;
}

/// Calls `fn(flat, offsets)` for every element of `out` in row-major order,
/// where offsets[j] is the flat index of the element of `ins[j]` that
/// broadcasts to it. Each of `ins` must broadcast to `out`.
template <std::size_t N, class Fn>
void for_each_broadcast(const nimble::Shape& out, const std::array<const nimble::Shape*, N>& ins,
                        Fn&& fn) {
  const std::size_t rank = out.rank();
  std::array<std::vector<std::int64_t>, N> strides;
  for (std::size_t j = 0; j < N; ++j) strides[j] = broadcast_strides(*ins[j], out);
  std::vector<std::int64_t> index(rank, 0);
  std::array<std::int64_t, N> offsets{};
  const std::int64_t count = out.numel();
  for (std::int64_t flat = 0; flat < count; ++flat) {
    fn(flat, std::as_const(offsets));
    for (std::size_t d = rank; d-- > 0;) {  // advance the odometer
      if (++index[d] < out[d]) {
        for (std::size_t j = 0; j < N; ++j) offsets[j] += strides[j][d];
        break;
      }
      for (std::size_t j = 0; j < N; ++j) offsets[j] -= strides[j][d] * (out[d] - 1);
      index[d] = 0;
    }
  }
}

// --- axes -------------------------------------------------------------------------------

/// A shape seen as [outer, extent, inner] around one axis: element (o, i, n)
/// is at flat index (o * extent + i) * inner + n.
struct AxisSplit {
  std::int64_t outer = 1;
  std::int64_t extent = 1;
  std::int64_t inner = 1;
};

[[nodiscard]] inline AxisSplit split_at(const nimble::Shape& shape, std::size_t axis) {
  AxisSplit s;
  for (std::size_t d = 0; d < shape.rank(); ++d) {
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis)
      s.extent = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

}  // namespace nimble::ops::ref
