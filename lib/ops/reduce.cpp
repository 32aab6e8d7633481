// Reductions (sum, mean, max, min, argmax) and the normalizations over one
// axis (softmax, log_softmax, layer_norm).
#include <algorithm>

#include "ops/ops.hpp"
#include "ops/relation_util.hpp"
#include "support/check.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kX[] = {"x"};
constexpr std::string_view kLayerNormArgs[] = {"x", "gamma", "beta"};

// x's shape without the `reduced` axes, or with 1 in their place (keepdims).
Shape reduce_shape(const TensorTypeNode& x, std::span<const std::size_t> reduced, bool keepdims) {
  Shape shape;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const bool is_reduced = std::find(reduced.begin(), reduced.end(), i) != reduced.end();
    if (!is_reduced)
      shape.push_back(x.shape[i]);
    else if (keepdims)
      shape.push_back(Dim(1));
  }
  return shape;
}

template <const OpDef& (*Op)(), bool kFloatingOnly>
Type reduction(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, Op());
  if (kFloatingOnly)
    expect_floating(x, "x");
  else
    expect_numeric(x, "x");
  std::vector<std::size_t> axes = normalize_axes(ints_attr(Op(), attrs, "axes"), x.rank());
  if (axes.empty())  // [] reduces every axis
    for (std::size_t i = 0; i < x.rank(); ++i) axes.push_back(i);
  return ir::tensor_type(reduce_shape(x, axes, bool_attr(Op(), attrs, "keepdims")), x.dtype);
}

Type argmax_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, argmax());
  expect_numeric(x, "x");
  const std::size_t axis[] = {normalize_axis(int_attr(argmax(), attrs, "axis"), x.rank())};
  return ir::tensor_type(reduce_shape(x, axis, bool_attr(argmax(), attrs, "keepdims")), DType::i64);
}

template <const OpDef& (*Op)()>
Type softmax_like(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, Op());
  expect_floating(x, "x");
  static_cast<void>(normalize_axis(int_attr(Op(), attrs, "axis"), x.rank()));
  return args[0];
}

Type layer_norm_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, layer_norm());
  expect_floating(x, "x");
  const std::int64_t axis_attr = int_attr(layer_norm(), attrs, "axis");
  const std::size_t axis = normalize_axis(axis_attr, x.rank());
  const double epsilon = real_attr(layer_norm(), attrs, "epsilon");
  if (!(epsilon > 0)) throw_error(ErrorKind::type_error, "epsilon must be > 0, got {}", epsilon);
  Shape shape = x.shape;
  for (std::size_t i = 1; i <= 2; ++i) {  // gamma, beta
    const std::string_view name = kLayerNormArgs[i];
    const TensorTypeNode& param = expect_tensor(args, i, layer_norm());
    expect_same_dtype(x, "x", param, name);
    expect_rank(param, name, 1);
    std::optional<Dim> dim = merge_equal_dim(shape[axis], param.shape[0]);
    if (!dim)
      throw_error(ErrorKind::type_error, "{} has {} elements but x's axis {} has {}", name,
                  ir::to_string(param.shape[0]), axis_attr, ir::to_string(shape[axis]));
    shape[axis] = *dim;
  }
  return ir::tensor_type(std::move(shape), x.dtype);
}

std::span<const ir::AttrSpec> reduce_attrs() {
  static const ir::AttrSpec attrs[] = {
      {"axes", ir::AttrKind::integers, std::vector<std::int64_t>{}},
      {"keepdims", ir::AttrKind::boolean, false}};
  return attrs;
}

std::span<const ir::AttrSpec> softmax_attrs() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{-1}}};
  return attrs;
}

}  // namespace

const OpDef& sum() {
  static const OpDef def{.name = "sum",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&sum, false>};
  return def;
}

const OpDef& mean() {
  static const OpDef def{.name = "mean",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&mean, true>};
  return def;
}

const OpDef& max() {
  static const OpDef def{.name = "max",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&max, false>};
  return def;
}

const OpDef& min() {
  static const OpDef def{.name = "min",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&min, false>};
  return def;
}

const OpDef& argmax() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::nullopt},
                                       {"keepdims", ir::AttrKind::boolean, false}};
  static const OpDef def{
      .name = "argmax", .arg_names = kX, .attrs = attrs, .type_relation = &argmax_relation};
  return def;
}

const OpDef& softmax() {
  static const OpDef def{.name = "softmax",
                         .arg_names = kX,
                         .attrs = softmax_attrs(),
                         .type_relation = &softmax_like<&softmax>};
  return def;
}

const OpDef& log_softmax() {
  static const OpDef def{.name = "log_softmax",
                         .arg_names = kX,
                         .attrs = softmax_attrs(),
                         .type_relation = &softmax_like<&log_softmax>};
  return def;
}

const OpDef& layer_norm() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{-1}},
                                       {"epsilon", ir::AttrKind::real, 1e-5}};
  static const OpDef def{.name = "layer_norm",
                         .arg_names = kLayerNormArgs,
                         .attrs = attrs,
                         .type_relation = &layer_norm_relation};
  return def;
}

}  // namespace nimble::ops
