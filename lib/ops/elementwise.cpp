// Elementwise unary ops: (x) -> x's type. Float dtypes only, except neg and
// abs (any numeric dtype), cast (any dtype) and logical_not (bool).
#include "ops/ops.hpp"
#include "ops/relation_util.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kX[] = {"x"};

template <const OpDef& (*Op)()>
Type floating_unary(std::span<const Type> args, const ir::Attrs&) {
  expect_floating(expect_tensor(args, 0, Op()), "x");
  return args[0];
}

template <const OpDef& (*Op)()>
Type numeric_unary(std::span<const Type> args, const ir::Attrs&) {
  expect_numeric(expect_tensor(args, 0, Op()), "x");
  return args[0];
}

Type cast_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, cast());
  return ir::tensor_type(x.shape, dtype_attr(cast(), attrs, "dtype"));
}

Type logical_not_relation(std::span<const Type> args, const ir::Attrs&) {
  expect_dtype(expect_tensor(args, 0, logical_not()), "x", DType::boolean);
  return args[0];
}

}  // namespace

const OpDef& neg() {
  static const OpDef def{
      .name = "neg", .arg_names = kX, .attrs = {}, .type_relation = &numeric_unary<&neg>};
  return def;
}

const OpDef& abs() {
  static const OpDef def{
      .name = "abs", .arg_names = kX, .attrs = {}, .type_relation = &numeric_unary<&abs>};
  return def;
}

const OpDef& exp() {
  static const OpDef def{
      .name = "exp", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&exp>};
  return def;
}

const OpDef& log() {
  static const OpDef def{
      .name = "log", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&log>};
  return def;
}

const OpDef& sqrt() {
  static const OpDef def{
      .name = "sqrt", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&sqrt>};
  return def;
}

const OpDef& rsqrt() {
  static const OpDef def{
      .name = "rsqrt", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&rsqrt>};
  return def;
}

const OpDef& tanh() {
  static const OpDef def{
      .name = "tanh", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&tanh>};
  return def;
}

const OpDef& sigmoid() {
  static const OpDef def{
      .name = "sigmoid", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&sigmoid>};
  return def;
}

const OpDef& relu() {
  static const OpDef def{
      .name = "relu", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&relu>};
  return def;
}

const OpDef& gelu() {
  static const OpDef def{
      .name = "gelu", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&gelu>};
  return def;
}

const OpDef& erf() {
  static const OpDef def{
      .name = "erf", .arg_names = kX, .attrs = {}, .type_relation = &floating_unary<&erf>};
  return def;
}

const OpDef& cast() {
  static const ir::AttrSpec attrs[] = {{"dtype", ir::AttrKind::dtype, std::nullopt}};
  static const OpDef def{
      .name = "cast", .arg_names = kX, .attrs = attrs, .type_relation = &cast_relation};
  return def;
}

const OpDef& logical_not() {
  static const OpDef def{
      .name = "logical_not", .arg_names = kX, .attrs = {}, .type_relation = &logical_not_relation};
  return def;
}

}  // namespace nimble::ops
