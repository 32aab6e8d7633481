// Helpers shared by the type relations of lib/ops: checked access to
// arguments and attributes, axis normalization, and merging of dims that must
// be equal. Each failure is Error(type_error) whose message names the argument
// as the op's arg_names do; inference prefixes the op name and the call site,
// so no message here names the op. Defined in registry.cpp, the op library's
// shared core.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/op.hpp"

namespace nimble::ops {

using ir::Dim;
using ir::TensorTypeNode;
using ir::Type;
using Shape = std::vector<Dim>;

// --- arguments ---------------------------------------------------------------------

/// args[i] as a tensor type: "x must be a tensor, got List<f32[2]>".
[[nodiscard]] const TensorTypeNode& expect_tensor(std::span<const Type> args, std::size_t i,
                                                  const ir::OpDef& op);
/// "x must be a floating-point tensor, got i32[3]".
void expect_floating(const TensorTypeNode& t, std::string_view name);
/// Any dtype but bool: "a must be a numeric tensor, got bool[2]".
void expect_numeric(const TensorTypeNode& t, std::string_view name);
/// "cond must be bool, got f32[2]".
void expect_dtype(const TensorTypeNode& t, std::string_view name, DType dtype);
/// i32 or i64: "indices must be i32 or i64, got f32[3]".
void expect_index_dtype(const TensorTypeNode& t, std::string_view name);
/// "a is f32 but b is i32".
void expect_same_dtype(const TensorTypeNode& a, std::string_view a_name, const TensorTypeNode& b,
                       std::string_view b_name);
/// "weight must have rank 2, got f32[3]".
void expect_rank(const TensorTypeNode& t, std::string_view name, std::size_t rank);
/// "x must have rank >= 1, got f32[]".
void expect_min_rank(const TensorTypeNode& t, std::string_view name, std::size_t rank);
/// An i64 vector of static length k (a run-time shape or bounds), returning k:
/// "shape must be an i64 vector of static length, got i64[?]".
[[nodiscard]] std::size_t expect_static_i64_vector(const TensorTypeNode& t, std::string_view name);
/// A rank-0 tensor: "value must be a scalar, got f32[2]".
void expect_scalar(const TensorTypeNode& t, std::string_view name);

// --- attributes (ir::attr_or_default, unwrapped) -------------------------------------

[[nodiscard]] bool bool_attr(const ir::OpDef& op, const ir::Attrs& attrs, std::string_view name);
[[nodiscard]] std::int64_t int_attr(const ir::OpDef& op, const ir::Attrs& attrs,
                                    std::string_view name);
[[nodiscard]] double real_attr(const ir::OpDef& op, const ir::Attrs& attrs, std::string_view name);
[[nodiscard]] const std::vector<std::int64_t>& ints_attr(const ir::OpDef& op,
                                                         const ir::Attrs& attrs,
                                                         std::string_view name);
[[nodiscard]] DType dtype_attr(const ir::OpDef& op, const ir::Attrs& attrs, std::string_view name);

/// IR text of a tensor type: "f32[?, 3]".
[[nodiscard]] std::string to_string(const TensorTypeNode& t);
/// "[1, -1]".
[[nodiscard]] std::string to_string(std::span<const std::int64_t> values);

// --- axes and dims -------------------------------------------------------------------

/// `axis` in [-rank, rank) as an index: "axis 3 is out of range for rank 2".
[[nodiscard]] std::size_t normalize_axis(std::int64_t axis, std::size_t rank);
/// Each of `axes`, normalized; a repeated axis is an error:
/// "axes [1, -1] name axis 1 twice".
[[nodiscard]] std::vector<std::size_t> normalize_axes(std::span<const std::int64_t> axes,
                                                      std::size_t rank);

/// The same dim: equal constants, both Any, or symbols of one name (the bound
/// does not matter: it is a property of the symbol).
[[nodiscard]] bool same_dim(const Dim& a, const Dim& b) noexcept;
[[nodiscard]] inline bool is_one(const Dim& d) noexcept {
  return d.is_fixed() && d.value() == 1;
}
/// Two dims that must be equal at run time: nullopt when they are different
/// constants, else the more specific one (fixed over symbol over Any; a
/// bounded symbol over the same unbounded one).
[[nodiscard]] std::optional<Dim> merge_equal_dim(const Dim& a, const Dim& b);

}  // namespace nimble::ops
