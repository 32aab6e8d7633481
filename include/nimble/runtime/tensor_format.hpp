// fmt support: fmt::format("{}", tensor), "{}" for Shape, DType and Device.
#pragma once

#include <fmt/format.h>

#include "nimble/runtime/device.hpp"
#include "nimble/runtime/dtype.hpp"
#include "nimble/runtime/shape.hpp"
#include "nimble/runtime/tensor.hpp"

namespace nimble::detail {
// Formats any value with a nimble::to_string overload, ignoring format specs.
template <class T>
struct ToStringFormatter : fmt::formatter<std::string_view> {
  auto format(const T& value, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(to_string(value)), ctx);
  }
};
}  // namespace nimble::detail

template <>
struct fmt::formatter<nimble::Tensor> : nimble::detail::ToStringFormatter<nimble::Tensor> {};
template <>
struct fmt::formatter<nimble::Shape> : nimble::detail::ToStringFormatter<nimble::Shape> {};
template <>
struct fmt::formatter<nimble::DType> : nimble::detail::ToStringFormatter<nimble::DType> {};
template <>
struct fmt::formatter<nimble::Device> : nimble::detail::ToStringFormatter<nimble::Device> {};
