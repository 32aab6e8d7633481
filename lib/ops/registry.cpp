#include "ops/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <variant>

#include "ops/ops.hpp"
#include "ops/relation_util.hpp"
#include "support/check.hpp"

namespace nimble::ir {

std::span<const OpDef* const> all_ops() noexcept {
  // In ops.hpp order.
  static const OpDef* const table[] = {
      // elementwise unary
      &ops::neg(), &ops::abs(), &ops::exp(), &ops::log(), &ops::sqrt(), &ops::rsqrt(), &ops::tanh(),
      &ops::sigmoid(), &ops::relu(), &ops::gelu(), &ops::erf(), &ops::cast(), &ops::logical_not(),
      // binary
      &ops::add(), &ops::sub(), &ops::mul(), &ops::div(), &ops::maximum(), &ops::minimum(),
      &ops::power(), &ops::equal(), &ops::not_equal(), &ops::less(), &ops::less_equal(),
      &ops::greater(), &ops::greater_equal(), &ops::logical_and(), &ops::logical_or(),
      &ops::where(),
      // reductions
      &ops::sum(), &ops::mean(), &ops::max(), &ops::min(), &ops::argmax(), &ops::softmax(),
      &ops::log_softmax(), &ops::layer_norm(),
      // linear algebra
      &ops::dense(), &ops::matmul(), &ops::batch_matmul(),
      // shape and data movement
      &ops::reshape(), &ops::transpose(), &ops::expand_dims(), &ops::squeeze(), &ops::concatenate(),
      &ops::split(), &ops::strided_slice(), &ops::dynamic_strided_slice(), &ops::take(),
      &ops::embedding(),
      // creation and data-dependent shapes
      &ops::zeros(), &ops::ones(), &ops::full(), &ops::arange(), &ops::nonzero(), &ops::shape_of(),
      // devices
      &ops::device_copy(),
      // collecting loop results
      &ops::stack(), &ops::dynamic_update_slice()};
  return table;
}

const OpDef* find_op(std::string_view name) noexcept {
  for (const OpDef* op : all_ops())
    if (op->name == name) return op;
  return nullptr;
}

namespace {

// AttrKind lists the alternatives of AttrValue in the same order.
static_assert(
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::boolean), AttrValue>, bool> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::integer), AttrValue>,
                   std::int64_t> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::real), AttrValue>, double> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::string), AttrValue>,
                   std::string> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::integers), AttrValue>,
                   std::vector<std::int64_t>> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::dtype), AttrValue>, DType>);

std::string_view kind_name(AttrKind kind) noexcept {
  switch (kind) {
    case AttrKind::boolean:
      return "boolean";
    case AttrKind::integer:
      return "integer";
    case AttrKind::real:
      return "real";
    case AttrKind::string:
      return "string";
    case AttrKind::integers:
      return "integers";
    case AttrKind::dtype:
      return "dtype";
  }
  return "";
}

const AttrSpec* find_spec(const OpDef& op, std::string_view name) noexcept {
  for (const AttrSpec& spec : op.attrs)
    if (spec.name == name) return &spec;
  return nullptr;
}

void check_kind(const OpDef& op, const AttrSpec& spec, const AttrValue& value) {
  if (value.index() != static_cast<std::size_t>(spec.kind))
    throw_error(ErrorKind::type_error, "{}: attribute '{}' must be {}, got {}", op.name, spec.name,
                kind_name(spec.kind), to_string(value));
}

}  // namespace

const AttrValue& attr_or_default(const OpDef& op, const Attrs& call_attrs, std::string_view name) {
  const AttrSpec* spec = find_spec(op, name);
  NIMBLE_ASSERT(spec != nullptr, "attr_or_default: the op declares no such attribute");
  if (const AttrValue* value = call_attrs.find(name)) {
    check_kind(op, *spec, *value);
    return *value;
  }
  if (!spec->default_value)
    throw_error(ErrorKind::type_error, "{}: missing attribute '{}'", op.name, name);
  return *spec->default_value;
}

void check_attrs(const OpDef& op, const Attrs& attrs) {
  for (const auto& [name, value] : attrs.items()) {
    const AttrSpec* spec = find_spec(op, name);
    if (!spec) throw_error(ErrorKind::type_error, "{}: unknown attribute '{}'", op.name, name);
    check_kind(op, *spec, value);
  }
  for (const AttrSpec& spec : op.attrs)
    if (!spec.default_value && !attrs.find(spec.name))
      throw_error(ErrorKind::type_error, "{}: missing attribute '{}'", op.name, spec.name);
}

}  // namespace nimble::ir

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
