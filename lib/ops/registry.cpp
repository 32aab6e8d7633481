// The op table: every op of the library, installed in the IR's table
// (ir::install_ops), and the helpers of relation_util.hpp.
#include "ops/ops.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <variant>

#include "ops/relation_util.hpp"
#include "support/check.hpp"

namespace nimble::ops {

namespace {

// Every op of this library, in ops.def order.
std::span<const ir::OpDef* const> builtin_ops() noexcept {
  static const ir::OpDef* const table[] = {
#define NIMBLE_OP(name) &name(),
#include "ops/ops.def"
#undef NIMBLE_OP
  };
  return table;
}

// Installed in the IR's table when the library loads, before any code of
// the host can parse a module or list the ops.
[[maybe_unused]] const bool installed = (ir::install_ops(builtin_ops()), true);

}  // namespace

}  // namespace nimble::ops

// --- relation_util.hpp ----------------------------------------------------------------

namespace nimble::ops {

std::string to_string(const TensorTypeNode& t) {
  return ir::to_string(Type(Ref<const ir::TypeNode>(&t)));
}

std::string to_string(std::span<const std::int64_t> values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

const TensorTypeNode& expect_tensor(std::span<const Type> args, std::size_t i,
                                    const ir::OpDef& op) {
  NIMBLE_ASSERT(i < args.size() && i < op.arg_names.size(), "expect_tensor: no such argument");
  const auto* t = args[i].as<TensorTypeNode>();
  if (!t)
    throw_error(ErrorKind::type_error, "{} must be a tensor, got {}", op.arg_names[i],
                ir::to_string(args[i]));
  return *t;
}

void expect_floating(const TensorTypeNode& t, std::string_view name) {
  if (!is_floating(t.dtype))
    throw_error(ErrorKind::type_error, "{} must be a floating-point tensor, got {}", name,
                to_string(t));
}

void expect_numeric(const TensorTypeNode& t, std::string_view name) {
  if (t.dtype == DType::boolean)
    throw_error(ErrorKind::type_error, "{} must be a numeric tensor, got {}", name, to_string(t));
}

void expect_dtype(const TensorTypeNode& t, std::string_view name, DType dtype) {
  if (t.dtype != dtype)
    throw_error(ErrorKind::type_error, "{} must be {}, got {}", name, nimble::to_string(dtype),
                to_string(t));
}

void expect_index_dtype(const TensorTypeNode& t, std::string_view name) {
  if (t.dtype != DType::i32 && t.dtype != DType::i64)
    throw_error(ErrorKind::type_error, "{} must be i32 or i64, got {}", name, to_string(t));
}

void expect_same_dtype(const TensorTypeNode& a, std::string_view a_name, const TensorTypeNode& b,
                       std::string_view b_name) {
  if (a.dtype != b.dtype)
    throw_error(ErrorKind::type_error, "{} is {} but {} is {}", a_name, nimble::to_string(a.dtype),
                b_name, nimble::to_string(b.dtype));
}

void expect_rank(const TensorTypeNode& t, std::string_view name, std::size_t rank) {
  if (t.rank() != rank)
    throw_error(ErrorKind::type_error, "{} must have rank {}, got {}", name, rank, to_string(t));
}

void expect_min_rank(const TensorTypeNode& t, std::string_view name, std::size_t rank) {
  if (t.rank() < rank)
    throw_error(ErrorKind::type_error, "{} must have rank >= {}, got {}", name, rank, to_string(t));
}

std::size_t expect_static_i64_vector(const TensorTypeNode& t, std::string_view name) {
  if (t.dtype != DType::i64 || t.rank() != 1 || !t.shape[0].is_fixed())
    throw_error(ErrorKind::type_error, "{} must be an i64 vector of static length, got {}", name,
                to_string(t));
  return static_cast<std::size_t>(t.shape[0].value());
}

void expect_scalar(const TensorTypeNode& t, std::string_view name) {
  if (t.rank() != 0)
    throw_error(ErrorKind::type_error, "{} must be a scalar, got {}", name, to_string(t));
}

bool bool_attr(const ir::OpDef& op, const ir::Attrs& attrs, std::string_view name) {
  return std::get<bool>(ir::attr_or_default(op, attrs, name));
}
std::int64_t int_attr(const ir::OpDef& op, const ir::Attrs& attrs, std::string_view name) {
  return std::get<std::int64_t>(ir::attr_or_default(op, attrs, name));
}
double real_attr(const ir::OpDef& op, const ir::Attrs& attrs, std::string_view name) {
  return std::get<double>(ir::attr_or_default(op, attrs, name));
}
const std::vector<std::int64_t>& ints_attr(const ir::OpDef& op, const ir::Attrs& attrs,
                                           std::string_view name) {
  return std::get<std::vector<std::int64_t>>(ir::attr_or_default(op, attrs, name));
}
DType dtype_attr(const ir::OpDef& op, const ir::Attrs& attrs, std::string_view name) {
  return std::get<DType>(ir::attr_or_default(op, attrs, name));
}

std::size_t normalize_axis(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    throw_error(ErrorKind::type_error, "axis {} is out of range for rank {}", axis, rank);
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

std::vector<std::size_t> normalize_axes(std::span<const std::int64_t> axes, std::size_t rank) {
  std::vector<std::size_t> result;
  for (std::int64_t axis : axes) {
    const std::size_t a = normalize_axis(axis, rank);
    if (std::find(result.begin(), result.end(), a) != result.end())
      throw_error(ErrorKind::type_error, "axes {} name axis {} twice", to_string(axes), a);
    result.push_back(a);
  }
  return result;
}

bool same_dim(const Dim& a, const Dim& b) noexcept {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Dim::Kind::fixed:
      return a.value() == b.value();
    case Dim::Kind::any:
      return true;
    case Dim::Kind::symbol:
      return a.name() == b.name();
  }
  return false;
}

std::optional<Dim> merge_equal_dim(const Dim& a, const Dim& b) {
  if (a.is_fixed() && b.is_fixed() && a.value() != b.value()) return std::nullopt;
  if (a.is_fixed() || b.is_any()) return a;
  if (b.is_fixed() || a.is_any()) return b;
  // Two symbols: keep a, unless b is the same symbol with a bound a lacks.
  if (a.name() == b.name() && !a.upper_bound() && b.upper_bound()) return b;
  return a;
}

}  // namespace nimble::ops
