// Creation ops and ops whose result shape depends on run-time values: the
// extents they produce are Any, their ranks come from the types.
#include "ops/ops.hpp"
#include "ops/relation_util.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kShape[] = {"shape"};
constexpr std::string_view kFullArgs[] = {"shape", "value"};
constexpr std::string_view kArangeArgs[] = {"start", "stop", "step"};
constexpr std::string_view kX[] = {"x"};

// A tensor of `dtype` whose rank is the static length of the shape argument.
template <const OpDef& (*Op)()>
Type filled(std::span<const Type> args, const ir::Attrs& attrs) {
  const std::size_t rank = expect_static_i64_vector(expect_tensor(args, 0, Op()), "shape");
  if (Op().arg_names.size() > 1) expect_scalar(expect_tensor(args, 1, Op()), "value");
  return ir::tensor_type(Shape(rank, ir::Any), dtype_attr(Op(), attrs, "dtype"));
}

Type arange_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& start = expect_tensor(args, 0, arange());
  expect_numeric(start, "start");
  for (std::size_t i = 0; i < 3; ++i) {
    const TensorTypeNode& t = expect_tensor(args, i, arange());
    expect_scalar(t, kArangeArgs[i]);
    expect_same_dtype(start, "start", t, kArangeArgs[i]);
  }
  return ir::tensor_type({ir::Any}, start.dtype);
}

Type nonzero_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& x = expect_tensor(args, 0, nonzero());
  return ir::tensor_type({ir::Any, Dim(static_cast<std::int64_t>(x.rank()))}, DType::i64);
}

Type shape_of_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& x = expect_tensor(args, 0, shape_of());
  return ir::tensor_type({Dim(static_cast<std::int64_t>(x.rank()))}, DType::i64);
}

std::span<const ir::AttrSpec> dtype_attrs() {
  static const ir::AttrSpec attrs[] = {{"dtype", ir::AttrKind::dtype, std::nullopt}};
  return attrs;
}

}  // namespace

const OpDef& zeros() {
  static const OpDef def{.name = "zeros",
                         .arg_names = kShape,
                         .attrs = dtype_attrs(),
                         .type_relation = &filled<&zeros>};
  return def;
}

const OpDef& ones() {
  static const OpDef def{
      .name = "ones", .arg_names = kShape, .attrs = dtype_attrs(), .type_relation = &filled<&ones>};
  return def;
}

const OpDef& full() {
  static const OpDef def{.name = "full",
                         .arg_names = kFullArgs,
                         .attrs = dtype_attrs(),
                         .type_relation = &filled<&full>};
  return def;
}

const OpDef& arange() {
  static const OpDef def{
      .name = "arange", .arg_names = kArangeArgs, .attrs = {}, .type_relation = &arange_relation};
  return def;
}

const OpDef& nonzero() {
  static const OpDef def{
      .name = "nonzero", .arg_names = kX, .attrs = {}, .type_relation = &nonzero_relation};
  return def;
}

const OpDef& shape_of() {
  static const OpDef def{
      .name = "shape_of", .arg_names = kX, .attrs = {}, .type_relation = &shape_of_relation};
  return def;
}

}  // namespace nimble::ops
